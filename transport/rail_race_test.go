//go:build race

package transport

// railRace is true under the race detector, which slows the rail layer
// far more than a plain link: the root test's timing criteria are then
// meaningless and it is skipped.
const railRace = true
