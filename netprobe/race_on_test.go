//go:build race

package netprobe_test

// raceEnabled: the race detector slows the in-memory emulation so much on a
// loaded machine that emulated rates are not held to the tolerance of a
// plain run.
const raceEnabled = true
