package redisinfo

import "testing"

func TestEvictionOf(t *testing.T) {
	for _, c := range []struct {
		reply  string
		evicts bool
	}{
		{"# Memory\r\nused_memory:1024\r\nmaxmemory:0\r\nmaxmemory_policy:volatile-lru\r\n", false},
		{"# Memory\r\nmaxmemory:10485760\r\nmaxmemory_policy:volatile-lru\r\n", true},
		{"maxmemory:10485760\r\nmaxmemory_policy:allkeys-lfu\r\n", true},
		{"maxmemory:10485760\r\nmaxmemory_policy:noeviction\r\n", false},
		{"maxmemory:10485760\r\n", false}, // no policy: not known
		{"", false},
	} {
		e := EvictionOf(Parse(c.reply))
		if e.Evicts() != c.evicts {
			t.Errorf("%q: Evicts() = %v, want %v (%+v)", c.reply, e.Evicts(), c.evicts, e)
		}
	}
	e := EvictionOf(Parse("used_memory:1024\nmaxmemory:4096\nmaxmemory_policy:volatile-ttl\n"))
	if e.Used != 1024 || e.MaxMemory != 4096 || e.Policy != "volatile-ttl" || !e.Known {
		t.Errorf("parsed %+v", e)
	}
}
