//go:build !race

package netprobe

const raceOn = false
