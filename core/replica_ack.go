package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// WithReplicaAck: a write that a holder will count on (an acquisition, a renewal, an extension,
// ReleaseSet's value) counts only once n replicas acknowledged it (Redis WAIT). WAIT counts the
// replicas that received the writes made on its own connection, so the script and WAIT share one:
// the master's connection for the script's first key. WAIT is sent only after a reply that says
// the script wrote what must survive a failover; a refusal, a queued waiter or a failed owner
// check wait for nothing, and a NOSCRIPT reply (a master promoted a moment ago has no scripts)
// costs a script load, not a second WAIT.

// conn returns a connection of its own to the master that holds key, or nil when the client
// cannot give one (then a pipeline carries the script and WAIT together).
func (n *node) conn(ctx context.Context, key string) (*redis.Conn, error) {
	switch c := n.rdb.(type) {
	case *redis.ClusterClient:
		m, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		return m.Conn(), nil
	case *redis.Client: // a plain or a Sentinel failover client
		return c.Conn(), nil
	}
	return nil, nil
}

// acked runs script on one connection and, when need says its reply wrote what must survive a
// failover, WAITs there for the replicas. It returns how many acknowledged (n.replicas when
// nothing needed them).
func (n *node) acked(ctx context.Context, script *redis.Script, keys []string, args []any,
	need func(reply any) (bool, error)) (int64, error) {
	cn, err := n.conn(ctx, keys[0])
	if err != nil {
		return 0, err
	}
	if cn == nil {
		return n.ackedPipeline(ctx, script, keys, args, need)
	}
	defer cn.Close()
	v, err := script.Run(ctx, cn, keys, args...).Result() // EVALSHA, and EVAL on NOSCRIPT
	if err != nil {
		return 0, err
	}
	if ok, err := need(v); err != nil || !ok {
		return int64(n.replicas), err
	}
	return n.wait(ctx, cn)
}

// wait sends WAIT on cn.
func (n *node) wait(ctx context.Context, cn *redis.Conn) (int64, error) {
	acked, err := cn.Do(ctx, "WAIT", n.replicas, ms(n.replicaWait)).Int64()
	if err != nil {
		return 0, err
	}
	return acked, nil
}

// ackedPipeline is acked over a client that gives no connection of its own: the script and WAIT
// travel in one pipeline, so WAIT is sent whatever the reply.
func (n *node) ackedPipeline(ctx context.Context, script *redis.Script, keys []string, args []any,
	need func(reply any) (bool, error)) (int64, error) {
	send := func(ev func(p redis.Pipeliner) *redis.Cmd) (*redis.Cmd, *redis.Cmd, error) {
		p := n.rdb.Pipeline()
		c := ev(p)
		w := p.Do(ctx, "WAIT", n.replicas, ms(n.replicaWait))
		_, err := p.Exec(ctx)
		return c, w, err
	}
	evalsha := func(p redis.Pipeliner) *redis.Cmd { return p.EvalSha(ctx, script.Hash(), keys, args...) }
	ev, w, err := send(evalsha)
	if isNoScript(ev.Err()) {
		if lerr := script.Load(ctx, n.rdb).Err(); lerr != nil {
			return 0, lerr
		}
		ev, w, err = send(evalsha)
	}
	if ev.Err() != nil {
		return 0, ev.Err()
	}
	if ok, nerr := need(ev.Val()); nerr != nil || !ok {
		return int64(n.replicas), nerr
	}
	if err != nil {
		return 0, err
	}
	return w.Int64()
}

// renewAcked is a renewal round under WithReplicaAck: the scripts in one pipeline per master, then
// WAIT on the same connection when any renewed. A renewal the replicas did not acknowledge in time
// fails with an *ackError: the watchdog does not count it toward the lock's validity and tries
// again, so a holder whose replicas stall loses its lock at its validity deadline, before a
// replica promoted with an older copy can let anyone else take it.
func (n *node) renewAcked(ctx context.Context, items []renewItem) error {
	groups := map[*redis.Conn][]int{}
	var order []*redis.Conn
	byAddr := map[string]*redis.Conn{}
	for i := range items {
		cn, err := n.conn(ctx, items[i].keys[0])
		if err != nil {
			return err
		}
		if cn == nil {
			return n.renewVia(ctx, n.rdb.Pipeline(), items) // (renewed, but not waited for)
		}
		addr := cn.String()
		if have, ok := byAddr[addr]; ok {
			_ = cn.Close()
			cn = have
		} else {
			byAddr[addr] = cn
			order = append(order, cn)
		}
		groups[cn] = append(groups[cn], i)
	}
	var errs []error
	for _, cn := range order {
		errs = append(errs, n.renewGroup(ctx, cn, items, groups[cn]))
		_ = cn.Close()
	}
	return errors.Join(errs...)
}

// renewGroup renews items[idx] over cn and waits for the replicas.
func (n *node) renewGroup(ctx context.Context, cn *redis.Conn, items []renewItem, idx []int) error {
	part := make([]renewItem, len(idx))
	for j, i := range idx {
		part[j] = items[i]
	}
	err := n.renewVia(ctx, cn.Pipeline(), part)
	if isNoScript(err) {
		if err = n.loadRenewScripts(ctx, cn); err == nil {
			err = n.renewVia(ctx, cn.Pipeline(), part)
		}
	}
	renewed := false
	for j := range part {
		renewed = renewed || (part[j].err == nil && part[j].ok)
	}
	if renewed {
		acked, werr := n.wait(ctx, cn)
		for j := range part {
			if part[j].err != nil || !part[j].ok {
				continue
			}
			switch {
			case werr != nil:
				part[j].ok, part[j].err = false, werr
			case acked < int64(n.replicas):
				part[j].ok, part[j].err = false, &ackError{what: "the renewal", acked: acked,
					want: int64(n.replicas), wait: n.replicaWait}
			}
		}
	}
	for j, i := range idx {
		items[i].ok, items[i].err = part[j].ok, part[j].err
	}
	return err
}

// loadRenewScripts loads the renewal scripts (a lock's and a permit's) over s.
func (n *node) loadRenewScripts(ctx context.Context, s redis.Scripter) error {
	if err := n.s.renew.Load(ctx, s).Err(); err != nil {
		return err
	}
	return n.s.sem.renew.Load(ctx, s).Err()
}

// ackError reports that fewer replicas than WithReplicaAck asks for acknowledged a write in time.
type ackError struct {
	what        string // "the lock", "the renewal", "the extension", or "the value" of ReleaseSet
	acked, want int64
	wait        time.Duration
}

func (e *ackError) Error() string {
	msg := fmt.Sprintf("only %d of %d replicas acknowledged %s within %v", e.acked, e.want, e.what, e.wait)
	if e.what == ackedValue {
		msg += ": the value was written and the lock released, but the write may not survive a failover"
	}
	return msg
}

// ErrorType returns "replica_ack": instrumentation counts such errors apart.
func (e *ackError) ErrorType() string { return "replica_ack" }

const ackedValue = "the value"
