//go:build !linux

package main

import "time"

// preciseSleep sleeps for d (on Linux with nanosleep, see sleep_linux.go).
func preciseSleep(d time.Duration) { time.Sleep(d) }
