//go:build !race

package collective

// mcRace is true under the race detector (see multicast_race_test.go).
const mcRace = false
