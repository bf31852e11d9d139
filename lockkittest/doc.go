// Package lockkittest gives unit tests a lockkit client without a Redis to install: NewClient
// returns a *core.Client over an embedded Redis (miniredis) that lives as long as the test.
//
//	func TestReport(t *testing.T) {
//		locks := lockkittest.NewClient(t)
//		if err := report.Build(t.Context(), locks); err != nil { // code under test takes the *core.Client
//			t.Fatal(err)
//		}
//	}
//
// Every lockkit script runs on the embedded server, so acquisition, contention between clients,
// reentrancy, fencing tokens, release, the release wake-up and the watchdog's renewals behave as
// they do on one real Redis server. TTLs count down with the wall clock (miniredis's ClockTTL), so
// a lock nobody renews expires on time; Server.Miniredis().FastForward moves the server's clock
// ahead to make a held lock expire at once, which the holder then sees as a lost lock. Two clients
// from one Server act as two processes contending for the same locks.
//
// What it does not model:
//
//   - Real clocks: the server's clock is the test process's clock, so clock drift or a pause
//     between a client and Redis never happens here.
//   - Failover: there is no replica and no Sentinel, so a lock acknowledged by a master that
//     dies before replicating is never lost here (see lockkit's docs/guarantees.md).
//   - Redis Cluster: one server owns every slot; MOVED/ASK redirections and sharded pub/sub
//     across nodes are not exercised.
//   - Redlock: a quorum of independent servers needs several servers and network faults between
//     them; start several Servers if you need the API shape, not its failure modes.
//   - Latency and network faults: commands answer at once; there are no timeouts, resets or
//     partitions (SetError only makes every command fail), so retries and validity margins are
//     not tested.
//
// Use a real Redis for all of these, and for anything that depends on the exact Redis version:
// lockkit's own tests start redis-server processes (standalone, Sentinel and Cluster) and inject
// network faults; a test of your own that checks what happens when a lock is lost to failover or
// latency needs the same.
//
// The embedded server, its go-redis client and the lockkit client are closed by t.Cleanup when
// the test (or subtest) that made them ends; nothing needs a defer.
//
// In FIPS 140-only mode (GODEBUG=fips140=only), where miniredis cannot run a script (it names
// scripts by their SHA-1, which that mode forbids in the test's process), the server is a
// redis-server process from PATH instead; without one, NewServer and NewClient fail the test with
// the reason, and StartServer returns it as an error (see StartServer).
//
// StartServer starts the same embedded server outside a test, for programs that should run
// without a Redis to install (lockkit's examples and demo use it); the caller closes it.
//
// This package is its own module, github.com/lockkit/lockkit/lockkittest, which requires lockkit's
// root module and miniredis and nothing else: one go get, and miniredis enters the module graph
// only of modules that import it.
package lockkittest
