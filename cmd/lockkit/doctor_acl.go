package main

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// commands runs each command lockkit uses on s, in a form that changes nothing (on a key and a
// channel of its own under the prefix, PREFIX{@doctor/probe}), as the connected user: a command
// Redis does not know (renamed away, disabled) makes lockkit fail; one the ACL denies is missing
// from the user's grants (docs/security.md).
func (d *doctor) commands(ctx context.Context, s server) {
	want := append([]string(nil), serviceCommands...)
	if d.e.cluster {
		want = append(want, clusterCommands...)
	}
	var unknown, denied, optional []string
	for _, c := range append(want, append(permitCommands, "info")...) {
		err := d.probe(ctx, s.rdb, c)
		var rerr redis.Error
		switch {
		case err == nil || !errors.As(err, &rerr):
			continue // (a network error is the latency check's business)
		case strings.HasPrefix(err.Error(), "NOPERM"):
			if contains(want, c) {
				denied = append(denied, "+"+c)
			} else {
				optional = append(optional, "+"+c)
			}
		case strings.Contains(err.Error(), "unknown command"):
			unknown = append(unknown, c)
		}
	}
	user := "the connected user"
	if u, err := s.rdb.Do(ctx, "ACL", "WHOAMI").Text(); err == nil {
		user = "user " + u
	}
	switch {
	case len(unknown) > 0:
		d.add("commands", s.name, verdictUnsafe, "unknown to the server: "+strings.Join(unknown, " "),
			"lockkit needs scripts (EVAL, EVALSHA) and pub/sub (PUBLISH, SUBSCRIBE; SPUBLISH on a cluster): "+
				"do not rename or disable them (rename-command CONFIG is fine)")
	default:
		d.add("commands", s.name, verdictOK, "scripts, pub/sub"+map[bool]string{true: ", sharded pub/sub"}[d.e.cluster]+" answered", "")
	}
	switch {
	case len(denied) > 0:
		d.add("acl", s.name, verdictUnsafe, user+" lacks "+strings.Join(denied, " "),
			"grant them (docs/security.md, \"The ACL of a lockkit user\"): acquisitions fail with NOPERM")
	case len(optional) > 0:
		d.add("acl", s.name, verdictWarn, user+" has what locks need; lacks "+strings.Join(optional, " "),
			"semaphores and read-write locks need +zcard +zcount +zrange +zrangebyscore +zrank +exists +del; "+
				"+info lets each Client warn about eviction (docs/security.md)")
	default:
		d.add("acl", s.name, verdictOK, user+" has every command lockkit uses", "")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// probe runs command c in a form that changes nothing, and returns Redis's error: an error the
// command gave once the ACL let it run (NOSCRIPT, a syntax error) means it may run.
func (d *doctor) probe(ctx context.Context, rdb *redis.Client, c string) error {
	k := d.e.prefix + "{@doctor/probe}"
	var args []any
	switch c {
	case "evalsha":
		args = []any{"evalsha", strings.Repeat("0", 40), 0} // NOSCRIPT
	case "eval":
		args = []any{"eval", "return 1", 0}
	case "get", "pttl", "exists", "zcard", "zpopmin", "del":
		args = []any{c, k}
	case "set":
		args = []any{"set", k, "x", "XX", "PX", 1000} // only if it exists: it does not
	case "pexpire":
		args = []any{"pexpire", k, 1000}
	case "hget", "hdel", "zscore", "zrem", "zrank":
		args = []any{c, k, "f"}
	case "hset":
		return d.probeHset(ctx, rdb, k)
	case "zadd":
		args = []any{"zadd", k, "XX", "NX", 0, "m"} // a syntax error, after the ACL check
	case "zcount", "zrangebyscore":
		args = []any{c, k, 0, 1}
	case "zrange":
		args = []any{c, k, 0, 0}
	case "publish", "spublish":
		args = []any{c, k, "doctor"}
	case "subscribe", "unsubscribe", "ssubscribe", "sunsubscribe":
		return d.probeSubscribe(ctx, rdb, c, k)
	case "wait":
		args = []any{"wait", 0, 0}
	case "info":
		args = []any{"info", "server"}
	case "cluster|slots":
		args = []any{"cluster", "slots"}
	default: // time, ping, command
		args = []any{c}
		if c == "command" {
			args = append(args, "count")
		}
	}
	return rdb.Do(ctx, args...).Err()
}

// probeHset sets a field of the probe key and deletes it (the emptied hash goes with it).
func (d *doctor) probeHset(ctx context.Context, rdb *redis.Client, k string) error {
	if err := rdb.HSet(ctx, k, "f", "doctor").Err(); err != nil {
		return err
	}
	if rdb.HDel(ctx, k, "f").Err() != nil {
		rdb.PExpire(ctx, k, 1000) // (without +hdel: let it expire)
	}
	return nil
}

// probeSubscribe subscribes to the probe channel on a connection of its own (and unsubscribes,
// for an unsubscribe command) and waits for Redis's answer.
func (d *doctor) probeSubscribe(ctx context.Context, rdb *redis.Client, c, channel string) error {
	var ps *redis.PubSub
	sharded := c == "ssubscribe" || c == "sunsubscribe"
	if sharded {
		ps = rdb.SSubscribe(ctx, channel)
	} else {
		ps = rdb.Subscribe(ctx, channel)
	}
	defer ps.Close()
	unsub := strings.Contains(c, "unsubscribe")
	if _, err := ps.Receive(ctx); err != nil || !unsub {
		if unsub {
			return nil // (the subscribe's own probe says it)
		}
		return err
	}
	var err error
	if sharded {
		err = ps.SUnsubscribe(ctx, channel)
	} else {
		err = ps.Unsubscribe(ctx, channel)
	}
	if err == nil {
		_, err = ps.Receive(ctx)
	}
	return err
}
