//go:build race

package counters

// raceEnabled: the race detector changes allocation counts.
const raceEnabled = true
