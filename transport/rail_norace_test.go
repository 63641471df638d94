//go:build !race

package transport

const railRace = false
