package main

import (
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
)

// This example's tests pass in FIPS 140-only mode (GODEBUG=fips140=only): nothing it runs uses
// SHA-1 or MD5 (docs/security.md, "FIPS 140-only mode").
func TestFIPS140Only(t *testing.T) {
	locktest.UnderFIPS140Only(t, "^(TestRun_redis|TestRun_postgres)$", 2)
}
