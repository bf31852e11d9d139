package cronlock_test

import (
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
)

// Two replicas under a leader lock and a hung run ended by its maximum hold pass in FIPS 140-only
// mode (GODEBUG=fips140=only): nothing they run uses SHA-1 or MD5 (docs/security.md, "FIPS 140-only
// mode").
func TestFIPS140Only(t *testing.T) {
	locktest.UnderFIPS140Only(t, "^(TestWithLeader_twoReplicas|TestWithMaxHold_endsAHungRun)$", 2)
}
