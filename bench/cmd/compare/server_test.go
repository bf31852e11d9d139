package main

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

func TestParseInfo(t *testing.T) {
	txt := "# Commandstats\r\ncmdstat_evalsha:calls=10,usec=5,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=2,usec=1\r\ncmdstat_config|resetstat:calls=1,usec=1\r\ncmdstat_subscribe:calls=1,usec=1\r\n" +
		"# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:0.250000\r\n"
	st, err := parseInfo(txt)
	if err != nil {
		t.Fatal(err)
	}
	if st.calls["evalsha"] != 10 || st.calls["subscribe"] != 1 || st.cpuUsec != 1_750_000 {
		t.Errorf("parsed %+v", st)
	}
	if n := st.commands(); n != 11 {
		t.Errorf("commands() = %d, want 11 (harness commands excluded)", n)
	}
	if _, err := parseInfo("# CPU\r\nused_cpu_sys:x\r\n"); err == nil {
		t.Error("bad CPU figure accepted")
	}
	if _, err := parseInfo("# Commandstats\r\n"); err == nil {
		t.Error("INFO without commandstats accepted")
	}
}

func TestFastMax(t *testing.T) {
	reply := []any{[]any{"command", int64(1795950339), int64(3), int64(5)}, []any{"fast-command", int64(1795950339), int64(2), int64(4)}}
	if ms, err := fastMax(reply); err != nil || ms != 4 {
		t.Errorf("fastMax = %v, %v; want 4 (the fast-command event's maximum)", ms, err)
	}
	if ms, err := fastMax([]any{[]any{"command", int64(1), int64(3), int64(5)}}); err != nil || ms != 0 {
		t.Errorf("without a fast-command event: %v, %v; want 0", ms, err)
	}
	if _, err := fastMax([]any{[]any{"fast-command", int64(1)}}); err == nil {
		t.Error("a short entry accepted")
	}
}

// testServers starts n redis-servers for a test.
func testServers(t *testing.T, n int) []*server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	ss, err := startServers("redis-server", n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopServers(ss) })
	return ss
}

// testCtx bounds a test's work: a whole round of every scenario takes about 30 s on a quiet
// 2-core machine, twice that beside the rest of make test.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// The command counts the tables rest on: what each library sends top-level and what its
// scripts run, for a known number of uncontended lock+unlock operations.
func TestRig_countsTopLevelAndInScriptCommands(t *testing.T) {
	ss := testServers(t, 1)
	ctx := testCtx(t)
	const ops = 25
	cases := []struct {
		cfg       config
		top, trip int64
		inner     func(int64) bool
	}{
		// SET NX top-level, release EVALSHA running GET + DEL
		{rawConfig(), 2 * ops, 2 * ops, func(n int64) bool { return n == 2*ops }},
		// same shape as the floor
		{redsyncDefaults(1), 2 * ops, 2 * ops, func(n int64) bool { return n == 2*ops }},
		// EVALSHA obtain (SET inside) + EVALSHA release (GET + DEL)
		{redislockDefaults(), 2 * ops, 2 * ops, func(n int64) bool { return n == 3*ops }},
		// two EVALSHAs; the scripts do the lock's work (today acquire GET + TIME + SET, release GET + SET)
		{lockkitConfig(), 2 * ops, 2 * ops, func(n int64) bool { return n >= 3*ops }},
		// a lone caller through go-redis's automatic pipelining: every command a batch of its own
		// (the hook sees it, one round trip each), or straight out when coalesced only when busy
		{rawAutoConfig(), 2 * ops, 2 * ops, func(n int64) bool { return n == 2*ops }},
		{rawCoalescedConfig(), 2 * ops, 2 * ops, func(n int64) bool { return n == 2*ops }},
		{lockkitPipelinedConfig(pipelineThreshold, false), 2 * ops, 2 * ops, func(n int64) bool { return n >= 3*ops }},
		// lockkit's uncontended commands and nothing else: GET + TIME + SET, GET + SET
		{twoScriptConfig(false), 2 * ops, 2 * ops, func(n int64) bool { return n == 5*ops }},
		{twoScriptConfig(true), 2 * ops, 2 * ops, func(n int64) bool { return n == 5*ops }},
	}
	for _, c := range cases {
		t.Run(c.cfg.name, func(t *testing.T) {
			rg := newRig(ss)
			defer rg.close()
			im, err := c.cfg.make(rg.rdbs, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = im.close() }()
			if _, err := im.critical(ctx, "warm", nil); err != nil { // loads the scripts
				t.Fatal(err)
			}
			if err := rg.begin(ctx); err != nil {
				t.Fatal(err)
			}
			for range ops {
				if _, err := im.critical(ctx, "k", nil); err != nil {
					t.Fatal(err)
				}
			}
			u, err := rg.end(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if u.top != c.top || u.trips != c.trip || !c.inner(u.inner) {
				t.Errorf("top %d trips %d inner %d (calls %v), want top %d trips %d", u.top, u.trips, u.inner, u.calls, c.top, c.trip)
			}
			if u.cpu <= 0 {
				t.Errorf("server CPU %d µs", u.cpu)
			}
		})
	}
}

func FuzzParseInfo(f *testing.F) {
	f.Add("# Commandstats\r\ncmdstat_get:calls=3,usec=1\r\n# CPU\r\nused_cpu_sys:0.5\r\nused_cpu_user:0.25\r\n")
	f.Add("cmdstat_set:calls=-1\r\n")
	f.Add("cmdstat_x:usec=1,calls=99999999999999999999\n")
	f.Add("used_cpu_user:NaN\ncmdstat_a:calls=1")
	f.Fuzz(func(t *testing.T, txt string) {
		st, err := parseInfo(txt)
		if err != nil {
			return
		}
		if len(st.calls) == 0 {
			t.Fatalf("no error but no commandstats in %q", txt)
		}
		var want int64
		for k, v := range st.calls {
			if !harnessCommand(k) {
				want += v
			}
		}
		if st.commands() != want {
			t.Fatalf("commands() = %d, want %d", st.commands(), want)
		}
	})
}
