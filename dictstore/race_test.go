//go:build race

package dictstore

// raceEnabled: the race detector makes sync.Pool drop items, so allocation
// counts are meaningless under it.
const raceEnabled = true
