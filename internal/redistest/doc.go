// Package redistest gives tests real Redis servers.
//
// Every server is a fresh redis-server process (found on PATH) listening on a
// free 127.0.0.1 port, with its data directory and log file in t.TempDir().
// Persistence is off (save "" and appendonly no), so a server always starts
// empty. Servers are stopped when the test that started them ends
// (t.Cleanup), and the child process is started with Pdeathsig=SIGKILL so a
// crashed test binary does not leave orphaned servers behind. If the test
// failed, the tail of each server's log is written to the test log.
//
// Start returns a single server, StartN several independent ones (for
// Redlock-style tests) and StartCluster a six-node Redis Cluster (three
// masters, three replicas) created with redis-cli --cluster create. Options
// add a password (WithPassword), ACL users (WithACL), TLS (WithTLS) or any
// other redis-server argument (WithArgs).
//
// Servers can be stopped, killed, restarted on the same port, paused
// (SIGSTOP) and resumed (SIGCONT) to simulate crashes, restarts and network
// stalls; Server.StartDelayProxy puts a fixed reply latency in front of one
// (a distant server, without a fault-injection library). Admin helpers (Do, Flush, CommandStats, ResetStats) run on a
// short-lived connection that authenticates with full privileges, whatever
// users the test configured.
//
// If redis-server or redis-cli is missing, the test is skipped with an
// install hint, or fails when the CI environment variable is set (see
// Require).
//
// All helpers take the testing.TB of the calling test and report errors with
// t.Fatal, so they must be called from the test's own goroutine.
package redistest
