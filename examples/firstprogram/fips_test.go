package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The first program and its tests run in FIPS 140-only mode (GODEBUG=fips140=only), over a
// redis-server process that lockkittest starts in place of miniredis (which hashes scripts with
// SHA-1), or fail saying that none is installed: never a panic (#47: crypto/sha1: use of SHA-1 is
// not allowed in FIPS 140-only mode, from miniredis). It runs this test binary again in that mode.
func TestFIPS140Only(t *testing.T) {
	if os.Getenv("FIRSTPROGRAM_FIPS_CHILD") == "1" {
		t.Skip("the child runs the other tests")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^(TestRebuildIndex|TestDeposit_accountBusy_409|TestMainRuns)$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "GODEBUG=fips140=only", "FIRSTPROGRAM_FIPS_CHILD=1")
	out, err := cmd.CombinedOutput()
	_, lookErr := exec.LookPath("redis-server")
	switch {
	case strings.Contains(string(out), "panic"):
		t.Fatalf("under GODEBUG=fips140=only the program panicked:\n%s", out)
	case lookErr == nil && (err != nil || strings.Count(string(out), "--- PASS") != 3):
		t.Fatalf("under GODEBUG=fips140=only, with a redis-server on PATH: %v, want 3 tests passed:\n%s", err, out)
	case lookErr != nil && (err == nil || !strings.Contains(string(out), "no redis-server is on PATH")):
		t.Fatalf("under GODEBUG=fips140=only, without a redis-server: %v, want a failure saying so:\n%s", err, out)
	}
}
