package redistest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// installHint says how to get the Redis binaries.
const installHint = "install them with `sudo apt-get install -y redis-server redis-tools`, " +
	"or run `make test`, which installs them"

// Require checks that redis-server and redis-cli are on PATH. If either is
// missing it reports a message saying how to install them; it calls t.Fatal
// when the CI environment variable is non-empty, and t.Skip otherwise.
func Require(t testing.TB) {
	t.Helper()
	var missing []string
	for _, name := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(name); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := "redistest: " + strings.Join(missing, " and ") +
		" not found on PATH; this test needs a real Redis server: " + installHint
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// binaries returns the paths of redis-server and redis-cli, failing the test
// if they cannot be found (Require has normally been called before).
func binaries(t testing.TB) (server, cli string) {
	t.Helper()
	Require(t)
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	cli, err = exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return server, cli
}
