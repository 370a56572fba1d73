//go:build !race

package counters

const raceEnabled = false
