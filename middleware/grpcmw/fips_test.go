package grpcmw_test

import (
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
)

// A locked, idempotent gRPC call and its replay pass in FIPS 140-only mode (GODEBUG=fips140=only):
// nothing they run uses SHA-1 or MD5 (docs/security.md, "FIPS 140-only mode").
func TestFIPS140Only(t *testing.T) {
	locktest.UnderFIPS140Only(t, "^(TestIdempotency_concurrentDuplicates_wait_runOnce)$", 1)
}
