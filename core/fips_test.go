package core_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
)

// Every operation and every kind of hold works in FIPS 140-only mode (GODEBUG=fips140=only), where
// crypto/sha1 panics (issue #37): the workload of internal/fipsload (locks, pipelined and Redlock
// too, a fair lock and permits handed to queued waiters, read and write holds, a LockSet, Inspect,
// ForceRelease, an election, httpmw) runs as a program in that mode against a real server, and
// exits 0. The script hashes and the waiters' token digests come from the server.
func TestFIPS140Only_workload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a program")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the workload with")
	}
	bin := filepath.Join(t.TempDir(), "fipsload")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, gobin, "build", "-o", bin, "./internal/fipsload")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the workload: %v\n%s", err, out)
	}
	srv := redistest.Start(t)
	run := exec.CommandContext(ctx, bin, srv.Addr())
	run.Env = append(os.Environ(), "GODEBUG=fips140=only")
	out, err := run.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "fips140 enabled: true") || !strings.HasSuffix(string(out), "ok\n") {
		t.Fatalf("the workload under GODEBUG=fips140=only: %v\n%s", err, out)
	}
}
