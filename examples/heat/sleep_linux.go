package main

import (
	"syscall"
	"time"
)

// preciseSleep sleeps for d with the kernel's high-resolution timer.
// time.Sleep goes through the Go runtime's timers, which on an idle
// process wake up on a millisecond grid (a 2.2 ms sleep often lasts 3 ms),
// too coarse for the emulated kernel times; nanosleep overshoots by
// about 0.1 ms, the same for every rank. The blocked thread costs no CPU.
func preciseSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
