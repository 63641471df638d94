//go:build race

package collective

// mcRace is true under the race detector, which slows the brute-force
// reference down tenfold: the heavy multicast tests then check fewer
// instances (they still run).
const mcRace = true
