package gocronlock_test

import (
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
)

// gocron's locker (each run once across replicas) and elector pass in FIPS 140-only mode
// (GODEBUG=fips140=only): nothing they run uses SHA-1 or MD5 (docs/security.md, "FIPS 140-only
// mode").
func TestFIPS140Only(t *testing.T) {
	locktest.UnderFIPS140Only(t, "^(TestLocker_eachRunOnce|TestElector_lifecycle)$", 2)
}
