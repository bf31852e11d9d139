// Package embedredis starts the embedded Redis (miniredis) that the example programs use when no
// real Redis is given, and that package lockkittest gives users' unit tests. lockkit's own tests use
// real redis-server processes (internal/redistest). It is a module of its own, so that miniredis
// enters the module graph only of the modules that import it (examples, lockkittest).
package embedredis

import "github.com/alicebob/miniredis/v2"

// Start starts miniredis on a free loopback port. ClockTTL makes every TTL count down with the wall
// clock (each command first ages the keys by the time elapsed), which lockkit's watchdog relies on:
// it renews with PEXPIRE and reads PTTL, so a lock nobody renews must expire on time, as on a real
// Redis. Close the server when done.
func Start() (*miniredis.Miniredis, error) {
	mr := miniredis.NewMiniRedis()
	mr.ClockTTL(true)
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, err
	}
	return mr, nil
}
