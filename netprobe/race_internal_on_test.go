//go:build race

package netprobe

// raceOn: the race detector makes the large simulations ten times
// slower; they run without it.
const raceOn = true
