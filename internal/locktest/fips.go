package locktest

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// topPass matches the line of a top-level test that passed (a subtest's is indented).
var topPass = regexp.MustCompile(`(?m)^--- PASS: `)

// fipsChild marks the run of a test binary that UnderFIPS140Only started.
const fipsChild = "LOCKKIT_FIPS140_CHILD"

// UnderFIPS140Only runs the tests of this test binary that match run again, in a child process
// under GODEBUG=fips140=only, and fails t unless each of them passed there (none skipped, none
// panicked: a use of SHA-1 or MD5 panics in that mode). In the child it skips t itself. want is
// how many tests must pass.
func UnderFIPS140Only(t *testing.T, run string, want int) {
	t.Helper()
	if os.Getenv(fipsChild) == "1" {
		t.Skip("the child process runs the other tests")
	}
	cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "GODEBUG=fips140=only", fipsChild+"=1")
	out, err := cmd.CombinedOutput()
	switch passed := len(topPass.FindAll(out, -1)); {
	case strings.Contains(string(out), "panic:"):
		t.Fatalf("under GODEBUG=fips140=only, %s panicked:\n%s", run, out)
	case err != nil || passed != want:
		t.Fatalf("under GODEBUG=fips140=only, %s: %v, %d tests passed, want %d:\n%s", run, err, passed, want, out)
	}
}
