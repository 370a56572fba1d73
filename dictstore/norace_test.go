//go:build !race

package dictstore

const raceEnabled = false
