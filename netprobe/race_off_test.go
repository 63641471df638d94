//go:build !race

package netprobe_test

const raceEnabled = false
