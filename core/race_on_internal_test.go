//go:build race

package core

// raceExtra is what the race detector adds to an allocation count: crypto/rand.Read's buffer
// escapes under it (a token costs one allocation more).
const raceExtra = 1
