package otel_test

import (
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
)

// lockotel's spans and metrics for a hold and a contended lock pass in FIPS 140-only mode
// (GODEBUG=fips140=only): nothing they run uses SHA-1 or MD5 (docs/security.md, "FIPS 140-only
// mode").
func TestFIPS140Only(t *testing.T) {
	locktest.UnderFIPS140Only(t, "^(TestHook_acquire_work_release|TestHook_contention)$", 2)
}
