//go:build !race

package core

// raceExtra is what the race detector adds to an allocation count (race_on_internal_test.go).
const raceExtra = 0
