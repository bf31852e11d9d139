package main_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// doctorFinding is a line of lockkit doctor -o json.
type doctorFinding struct {
	Check, Node, Verdict, Value, Fix string
}

// doctor runs lockkit doctor with args and returns its findings (parsed from -o json), its text
// output and its exit code.
func doctor(t *testing.T, bin string, args ...string) ([]doctorFinding, string, int) {
	t.Helper()
	s := newSession(t, bin)
	out, code := s.run("", append([]string{"doctor", "-o", "json", "--samples", "20"}, args...)...)
	var found []doctorFinding
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var f doctorFinding
		if err := json.Unmarshal([]byte(l), &f); err != nil {
			t.Fatalf("not JSON Lines: %q: %v", l, err)
		}
		found = append(found, f)
	}
	text, textCode := s.run("", append([]string{"doctor", "--samples", "20"}, args...)...)
	if textCode != code {
		t.Errorf("exit code %d as text, %d as JSON", textCode, code)
	}
	t.Logf("lockkit doctor %s (exit %d):\n%s%s", strings.Join(args, " "), code, text, out)
	return found, text, code
}

// verdicts returns the verdict of each check on node ("" for every node) as "check=verdict".
func verdicts(found []doctorFinding) []string {
	var v []string
	for _, f := range found {
		v = append(v, f.Check+"="+f.Verdict)
	}
	return v
}

func has(t *testing.T, found []doctorFinding, check, verdict, value string) doctorFinding {
	t.Helper()
	for _, f := range found {
		if f.Check == check && f.Verdict == verdict && strings.Contains(f.Value, value) {
			return f
		}
	}
	t.Fatalf("no %s finding %s with %q: %v", check, verdict, value, found)
	return doctorFinding{}
}

// A server with a memory limit and volatile-lru (a managed Redis's defaults) is unsafe: exit 5, the
// eviction check names the policy and the fix. With noeviction the same server is fine.
func TestDoctor_evictingServer(t *testing.T) {
	bin := build(t)
	srv := redistest.Start(t, redistest.WithArgs("--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru"))
	found, text, code := doctor(t, bin, "--url", srv.Addr())
	if code != 5 {
		t.Fatalf("exit %d, want 5", code)
	}
	f := has(t, found, "eviction", "unsafe", "maxmemory-policy volatile-lru")
	if !strings.Contains(f.Fix, "noeviction") || !strings.Contains(f.Fix, "docs/troubleshooting.md#redis-may-evict-lock-keys") {
		t.Errorf("fix %q", f.Fix)
	}
	if !strings.HasSuffix(text, "1 unsafe\n") {
		t.Errorf("text does not end with the count:\n%s", text)
	}
	srv.Do(t, "CONFIG", "SET", "maxmemory-policy", "noeviction")
	found, _, code = doctor(t, bin, "--url", srv.Addr())
	if code != 0 {
		t.Fatalf("noeviction: exit %d, want 0: %v", code, verdicts(found))
	}
	want := []string{"topology=ok", "version=ok", "eviction=ok", "persistence=warn", "replicas=ok", "commands=ok", "acl=ok", "latency=ok", "keys=ok"}
	if got := verdicts(found); !slices.Equal(got, want) {
		t.Errorf("verdicts %v, want %v", got, want)
	}
}

// With CONFIG renamed away (as on ElastiCache and Memorystore) doctor reads what it needs from
// INFO: every check answers, and nothing is said about CONFIG.
func TestDoctor_configRenamedAway(t *testing.T) {
	bin := build(t)
	srv := redistest.Start(t, redistest.WithArgs("--rename-command", "CONFIG", "", "--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"))
	found, text, code := doctor(t, bin, "--url", srv.Addr())
	if code != 5 || strings.Contains(text, "unknown command") {
		t.Fatalf("exit %d, want 5 (allkeys-lru), and no unknown command:\n%s", code, text)
	}
	has(t, found, "eviction", "unsafe", "maxmemory-policy allkeys-lru")
	has(t, found, "commands", "ok", "scripts, pub/sub")
	if len(found) != 9 {
		t.Errorf("%d findings, want 9: %v", len(found), verdicts(found))
	}
}

// The service's user of docs/security.md passes (INFO and SCAN denied: warnings); the same user
// without +pexpire is unsafe, and doctor names the missing grant.
func TestDoctor_aclMissingGrant(t *testing.T) {
	bin := build(t)
	line := locktest.ACLUsers(locktest.Doc(t, "docs/security.md"))["lockkit"]
	srv := redistest.Start(t, redistest.WithACL(line, strings.Replace(line, "user lockkit ", "user lockkit-nopexpire ", 1)+" -pexpire"))
	found, _, code := doctor(t, bin, "--url", "redis://lockkit:CHANGE-ME@"+srv.Addr())
	if code != 0 {
		t.Fatalf("the documented user: exit %d, want 0: %v", code, found)
	}
	has(t, found, "acl", "warn", "lacks +zcard")
	has(t, found, "eviction", "warn", "cannot read INFO memory")
	found, _, code = doctor(t, bin, "--url", "redis://lockkit-nopexpire:CHANGE-ME@"+srv.Addr())
	if code != 5 {
		t.Fatalf("without +pexpire: exit %d, want 5", code)
	}
	has(t, found, "acl", "unsafe", "lacks +pexpire")
}

// A cluster with a master down (and its replica: nobody takes over) is unsafe: doctor names the
// master it cannot reach and checks the others.
func TestDoctor_clusterMasterDown(t *testing.T) {
	bin := build(t)
	cl := redistest.StartCluster(t)
	masters := cl.Masters(t)
	down := masters[0]
	cl.ReplicaOf(t, down).Kill(t)
	down.Kill(t)
	found, _, code := doctor(t, bin, "--cluster", "--timeout", "1s", "--url", masters[1].Addr())
	if code != 5 {
		t.Fatalf("exit %d, want 5", code)
	}
	f := has(t, found, "topology", "unsafe", "unreachable")
	if f.Node != down.Addr() {
		t.Errorf("unreachable %s, want %s", f.Node, down.Addr())
	}
	for _, m := range masters[1:] {
		n := 0
		for _, f := range found {
			if f.Node == m.Addr() && !strings.HasPrefix(f.Value, "cluster_state") {
				n++
			}
		}
		if n != 9 {
			t.Errorf("%s: %d findings, want 9", m.Addr(), n)
		}
	}
}
