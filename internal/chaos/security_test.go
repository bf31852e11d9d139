package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The ACLs these tests run are read from docs/security.md, the one source: a `user` line of the
// doc that lacks a command its workload needs fails them, and so does one that lists a command
// the workload can do without.

// The users and optional features of docs/security.md.
const (
	serviceUser = "lockkit"
	viewerUser  = "lockkit-viewer"

	featurePermits = "core.Permits"
	featureInspect = "Client.Inspect"
	featureForce   = "Client.ForceRelease"
	featureCluster = "Redis Cluster"
)

// securityDoc is what docs/security.md documents for ACLs.
type securityDoc struct {
	users  map[string]string   // user name -> the doc's `user` line, as written
	extras map[string][]string // optional feature -> the rules to add to the service's line
}

// readSecurityDoc reads the `user` lines (fenced code blocks that start with "user ") and the table
// of optional features of docs/security.md.
func readSecurityDoc(t testing.TB) securityDoc {
	t.Helper()
	md := locktest.Doc(t, "docs/security.md")
	d := securityDoc{users: locktest.ACLUsers(md), extras: map[string][]string{}}
	for _, row := range locktest.TableRows(locktest.Section(t, md, "Optional features")) {
		if len(row) < 2 {
			continue
		}
		add := locktest.CodeSpans(row[1])
		for _, f := range []string{featurePermits, featureInspect, featureForce, featureCluster} {
			if strings.Contains(row[0], f) && len(add) == 1 {
				d.extras[f] = strings.Fields(add[0])
			}
		}
	}
	for _, u := range []string{serviceUser, viewerUser} {
		if d.users[u] == "" {
			t.Fatalf("docs/security.md has no `user %s ...` line", u)
		}
	}
	for _, f := range []string{featurePermits, featureInspect, featureForce, featureCluster} {
		if len(d.extras[f]) == 0 {
			t.Fatalf("docs/security.md's optional features name no commands for %s", f)
		}
		for _, r := range d.extras[f] {
			if !strings.HasPrefix(r, "+") || slices.Contains(strings.Fields(d.users[serviceUser]), r) {
				t.Fatalf("%s: %q is not a command the service's line lacks", f, r)
			}
		}
	}
	return d
}

// commands returns the commands a `user` line grants ("+get", "+script|load").
func commands(line string) []string {
	var out []string
	for _, f := range strings.Fields(line) {
		if strings.HasPrefix(f, "+") {
			out = append(out, f)
		}
	}
	return out
}

// without returns line without the rule drop.
func without(line, drop string) string {
	f := strings.Fields(line)
	return strings.Join(slices.DeleteFunc(f, func(s string) bool { return s == drop }), " ")
}

// with returns line with the rules add.
func with(line string, add []string) string { return line + " " + strings.Join(add, " ") }

// aclDenials returns the ACL LOG entries of srv (commands, keys and channels denied), but for the
// INFO of core's eviction check, which a user without +info is denied once per Client by design
// (docs/security.md, "The eviction check"; core's TestEviction_deniedSaidOnce).
func aclDenials(t *testing.T, srv *redistest.Server) []string {
	var out []string
	for _, e := range srv.Do(t, "ACL", "LOG").([]any) {
		m := map[string]any{}
		switch x := e.(type) {
		case map[any]any:
			for k, v := range x {
				m[fmt.Sprint(k)] = v
			}
		case []any:
			for i := 0; i+1 < len(x); i += 2 {
				m[fmt.Sprint(x[i])] = x[i+1]
			}
		}
		if fmt.Sprint(m["reason"]) == "command" && fmt.Sprint(m["object"]) == "info" {
			continue
		}
		out = append(out, fmt.Sprintf("%v %v (%v)", m["reason"], m["object"], m["context"]))
	}
	return out
}

// startReplica starts a replica of srv and waits until it is in sync.
func startReplica(t *testing.T, srv *redistest.Server) {
	r := redistest.Start(t)
	r.Do(t, "REPLICAOF", "127.0.0.1", strconv.Itoa(srv.Port()))
	locktest.Eventually(t, 10*time.Second, "the replica in sync", func() bool {
		info := fmt.Sprint(r.Do(t, "INFO", "replication"))
		return strings.Contains(info, "master_link_status:up")
	})
}

// The service's line runs the whole lock workload, WithReplicaAck with a replica included, and
// Redis denies nothing.
func TestSecurity_ACL_minimalCommandSet(t *testing.T) {
	line := readSecurityDoc(t).users[serviceUser]
	srv := redistest.Start(t, redistest.WithACL(line))
	startReplica(t, srv)
	if err := lockWorkload(context.Background(), srv.Client(t), true); err != nil {
		t.Fatal(err)
	}
	if d := aclDenials(t, srv); len(d) > 0 {
		t.Fatalf("denied: %v", d)
	}
}

// Every command of the service's line is needed: without any one of them the workload fails or
// Redis logs a denial. (PING and UNSUBSCRIBE are left out of this check, as the doc says: they are
// only sent on a subscription idle for 5 s, and for a channel without waiters for 3 s.)
func TestSecurity_ACL_everyCommandNeeded(t *testing.T) {
	line := readSecurityDoc(t).users[serviceUser]
	for _, idle := range []string{"+ping", "+unsubscribe"} {
		if !slices.Contains(commands(line), idle) {
			t.Errorf("the service's line lacks %s", idle)
		}
	}
	for _, drop := range commands(line) {
		if drop == "+ping" || drop == "+unsubscribe" {
			continue
		}
		t.Run(drop, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, redistest.WithACL(without(line, drop)))
			err := aclWorkload(context.Background(), srv.Client(t))
			if d := aclDenials(t, srv); err == nil && len(d) == 0 {
				t.Fatalf("the workload needs no %s", drop)
			}
		})
	}
}

// Each optional feature runs with the service's line and the commands the doc lists for it, and
// needs each of them.
func TestSecurity_ACL_optionalFeatures(t *testing.T) {
	doc := readSecurityDoc(t)
	workloads := map[string]func(ctx context.Context, rdb, admin redis.UniversalClient) error{
		featurePermits: permitsWorkload,
		featureInspect: inspectWorkload,
		featureForce:   forceReleaseWorkload,
	}
	run := func(t *testing.T, feature, line string) ([]string, error) {
		srv := redistest.Start(t, redistest.WithACL(line))
		admin := redis.NewClient(srv.AdminOptions())
		t.Cleanup(func() { _ = admin.Close() })
		err := workloads[feature](context.Background(), srv.Client(t), admin)
		return aclDenials(t, srv), err
	}
	for feature := range workloads {
		line := with(doc.users[serviceUser], doc.extras[feature])
		t.Run(feature, func(t *testing.T) {
			t.Parallel()
			if d, err := run(t, feature, line); err != nil || len(d) > 0 {
				t.Fatalf("%v; denied: %v", err, d)
			}
		})
		for _, drop := range doc.extras[feature] {
			t.Run(feature+"/without"+drop, func(t *testing.T) {
				t.Parallel()
				if d, err := run(t, feature, without(line, drop)); err == nil && len(d) == 0 {
					t.Fatalf("%s needs no %s", feature, drop)
				}
			})
		}
	}
}

// The read-only operator (%R~) inspects a busy name, and cannot force-release it.
func TestSecurity_ACL_readOnlyOperator(t *testing.T) {
	line := readSecurityDoc(t).users[viewerUser]
	srv := redistest.Start(t, redistest.WithACL(line))
	admin := redis.NewClient(srv.AdminOptions())
	t.Cleanup(func() { _ = admin.Close() })
	ctx := context.Background()
	srv.Do(t, "SCRIPT", "FLUSH") // EVAL_RO first, then EVALSHA_RO
	for range 2 {
		if err := inspectWorkload(ctx, srv.Client(t), admin); err != nil {
			t.Fatal(err)
		}
	}
	if d := aclDenials(t, srv); len(d) > 0 {
		t.Fatalf("denied: %v", d)
	}
	c := locktest.NewClient(t, srv.Client(t))
	b, err := busyName(ctx, admin, "ro")
	if err != nil {
		t.Fatal(err)
	}
	defer b.stop()
	if _, err := c.ForceRelease(ctx, "ro"); !errors.Is(err, core.ErrMisconfigured) || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("force release as the read-only operator: %v, want NOPERM", err)
	}
	if _, err := c.TryAcquire(ctx, "ro-lock", time.Second); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("acquire as the read-only operator: %v, want NOPERM", err)
	}
}

// The service's line with the cluster's additions runs the lock workload on a Redis Cluster (whose
// replicas acknowledge WithReplicaAck), and needs each addition (but SUNSUBSCRIBE, sent for idle
// channels only).
func TestSecurity_ACL_cluster(t *testing.T) {
	doc := readSecurityDoc(t)
	line := with(doc.users[serviceUser], doc.extras[featureCluster])
	cl := redistest.StartCluster(t, redistest.WithACL(line))
	user := strings.Fields(line)[1]
	run := func(line string) ([]string, error) {
		var denied []string
		for _, n := range cl.Nodes() {
			n.Do(t, "ACL", "SETUSER", user, "reset")
			n.Do(t, append([]any{"ACL", "SETUSER"}, anys(strings.Fields(line)[1:])...)...)
			n.Do(t, "ACL", "LOG", "RESET")
		}
		for _, m := range cl.Masters(t) {
			m.Flush(t)
		}
		rdb := cl.Client(t)
		err := lockWorkload(context.Background(), rdb, true)
		_ = rdb.Close()
		for _, n := range cl.Nodes() {
			denied = append(denied, aclDenials(t, n)...)
		}
		return denied, err
	}
	if d, err := run(line); err != nil || len(d) > 0 {
		t.Fatalf("%v; denied: %v", err, d)
	}
	if !slices.Contains(doc.extras[featureCluster], "+sunsubscribe") {
		t.Error("the cluster's additions lack +sunsubscribe")
	}
	for _, drop := range doc.extras[featureCluster] {
		if drop == "+sunsubscribe" {
			continue // sent for channels idle 3 s only, as UNSUBSCRIBE
		}
		if d, err := run(without(line, drop)); err == nil && len(d) == 0 {
			t.Errorf("a cluster needs no %s", drop)
		}
	}
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

// The service's ACL keeps a lockkit user inside its prefix: another prefix or a plain command is
// refused.
func TestSecurity_ACL_confinesToPrefix(t *testing.T) {
	srv := redistest.Start(t, redistest.WithACL(readSecurityDoc(t).users[serviceUser]))
	rdb := srv.Client(t)
	ctx := context.Background()
	other := locktest.NewClient(t, rdb, core.WithPrefix("other:"))
	if _, err := other.TryAcquire(ctx, "x", time.Second); !errors.Is(err, core.ErrMisconfigured) || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("lock under another prefix: %v, want a NOPERM refusal", err)
	}
	if err := rdb.Set(ctx, "app:secret", "v", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("SET outside the prefix: %v, want NOPERM", err)
	}
	for _, cmd := range [][]any{{"FLUSHALL"}, {"KEYS", "*"}, {"CONFIG", "GET", "*"}, {"SUBSCRIBE", "app:events"}} {
		if err := rdb.Do(ctx, cmd...).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%v: %v, want NOPERM", cmd, err)
		}
	}
}

func TestSecurity_requirepass(t *testing.T) {
	srv := redistest.Start(t, redistest.WithPassword("s3cret-pw"))
	ctx := context.Background()
	if err := aclWorkload(ctx, srv.Client(t)); err != nil {
		t.Fatal(err)
	}
	o := srv.Options()
	o.Password = "wrong-pw"
	c := locktest.NewClient(t, redisVia(t, o, srv.Addr()))
	_, err := c.TryAcquire(ctx, "x", time.Second)
	if !errors.Is(err, core.ErrMisconfigured) || errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("wrong password: %v, want ErrMisconfigured, not ErrUnavailable", err)
	}
	if strings.Contains(err.Error(), "wrong-pw") || strings.Contains(err.Error(), "s3cret-pw") {
		t.Fatalf("error shows a password: %v", err)
	}
}

func TestSecurity_TLS(t *testing.T) {
	srv := redistest.Start(t, redistest.WithTLS())
	if srv.Options().TLSConfig == nil {
		t.Fatal("no TLS config")
	}
	if err := aclWorkload(context.Background(), srv.Client(t)); err != nil {
		t.Fatal(err)
	}
	o := srv.Options()
	o.TLSConfig = nil // plain text to a TLS port fails
	c := locktest.NewClient(t, redisVia(t, o, srv.Addr()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := c.TryAcquire(ctx, "x", time.Second); err == nil {
		t.Fatal("plain-text client got a lock from the TLS port")
	}
}

// TLS, a password and the service's ACL together.
func TestSecurity_TLSWithACL(t *testing.T) {
	srv := redistest.Start(t, redistest.WithTLS(), redistest.WithACL(readSecurityDoc(t).users[serviceUser]))
	if err := aclWorkload(context.Background(), srv.Client(t)); err != nil {
		t.Fatal(err)
	}
	if d := aclDenials(t, srv); len(d) > 0 {
		t.Fatalf("denied: %v", d)
	}
}
