// Package embedredis starts the embedded Redis (miniredis) that the example programs use when no
// real Redis is given, and that package lockkittest gives users' unit tests. lockkit's own tests use
// real redis-server processes (internal/redistest). It is a module of its own, so that miniredis
// enters the module graph only of the modules that import it (examples, lockkittest).
package embedredis

import (
	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// Start starts miniredis on a free loopback port. ClockTTL makes every TTL count down with the wall
// clock (each command first ages the keys by the time elapsed), which lockkit's watchdog relies on:
// it renews with PEXPIRE and reads PTTL, so a lock nobody renews must expire on time, as on a real
// Redis. Close the server when done.
//
// lockkit sends its read-only scripts (Inspect, Lock.TTL) with EVALSHA_RO. miniredis refuses TIME
// in them (Redis allows it: TIME writes nothing), so they run as EVALSHA here; the embedded server
// checks nothing about permissions anyway.
func Start() (*miniredis.Miniredis, error) {
	mr := miniredis.NewMiniRedis()
	mr.ClockTTL(true)
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, err
	}
	srv := mr.Server()
	srv.SetPreHook(func(c *server.Peer, cmd string, args ...string) bool {
		switch cmd {
		case "EVALSHA_RO", "EVAL_RO":
			srv.Dispatch(c, append([]string{cmd[:len(cmd)-3]}, args...))
			return true
		}
		return false
	})
	return mr, nil
}
