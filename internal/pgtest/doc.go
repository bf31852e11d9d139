// Package pgtest gives tests a real, private PostgreSQL server.
//
// Start runs initdb in a fresh temporary directory and starts postgres on a free 127.0.0.1 port,
// with trust authentication on loopback only and durability switched off (fsync=off) for speed.
// The server is stopped and its directory removed when the test ends; the child processes are
// started with Pdeathsig=SIGKILL so that a crashed test binary leaves nothing behind.
//
// The binaries are looked up on PATH, then in Debian's /usr/lib/postgresql/*/bin. If they are
// missing the test is skipped, or fails when the CI environment variable is set, with an install
// hint (apt-get install postgresql). PostgreSQL refuses to run as root: as root, pgtest runs it as
// the "postgres" (or "nobody") user.
package pgtest
