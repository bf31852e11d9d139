package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lockkit/lockkit/core/internal/script"
	"github.com/redis/go-redis/v9"
)

// WithReplicaAck: a write that a holder will count on (an acquisition, a renewal, an extension,
// ReleaseSet's value) counts only once n replicas acknowledged it (Redis WAIT). WAIT counts the
// writes made on its own connection, so the script and WAIT share one: the master's for the
// script's first key. WAIT follows only a reply that says the script wrote what must survive a
// failover; a NOSCRIPT reply (a newly promoted master) costs an EVAL, not a second WAIT.

// master returns the client of the master that holds key, primed (prime), or nil when n's client
// gives no connection of its own (then a pipeline carries the script and WAIT together).
func (n *Node) master(ctx context.Context, key string) (m *redis.Client, err error) {
	switch c := n.rdb.(type) {
	case *redis.ClusterClient:
		m, err = c.MasterForKey(ctx, key)
	case *redis.Client: // a plain or a Sentinel failover client
		m = c
	}
	if m == nil || err != nil {
		return nil, err
	}
	return m, n.prime(ctx, m)
}

// prime makes m set up one connection of its own before any Conn of it does. go-redis v9.23 shares
// a client's Options with its Conns, and the first connection to a server without maintenance
// notifications (Redis before 8) turns them off in those Options: Conns that set up connections
// concurrently would race on it (go test -race). Once m has set one up, no later one writes them.
func (n *Node) prime(ctx context.Context, m *redis.Client) error {
	addr := m.Options().Addr
	n.primeMu.Lock()
	done := n.primed[addr]
	n.primeMu.Unlock()
	if done {
		return nil
	}

	if err := m.Ping(ctx).Err(); err != nil {
		return err
	}

	n.primeMu.Lock()
	if len(n.primed) < 1024 { // (the masters of a cluster: a few)
		n.primed[addr] = true
	}
	n.primeMu.Unlock()
	return nil
}

// acked runs call on one connection and, when need says its reply wrote what must survive a
// failover, WAITs there. It returns how many replicas acknowledged (n.replicas if none needed to).
func (n *Node) acked(ctx context.Context, call script.Call, need func(reply any) (bool, error)) (int64, error) {
	key, _ := call.Keys()[0].(string) // (which routes it on a cluster)
	m, err := n.master(ctx, key)
	if err != nil {
		return 0, err
	}
	var cmd *redis.Cmd
	var cn *redis.Conn
	var w *redis.IntCmd
	if m != nil {
		cn = m.Conn()
		defer cn.Close()
		cmd = call.Run(ctx, script.Via(n.send, cn)) // EVALSHA, and EVAL on NOSCRIPT
	} else { // no connection of its own: the script and WAIT in one pipeline, WAIT whatever the reply
		s := []renewSend{{call: call}}
		w, _ = n.pipelined(ctx, n.rdb.Pipeline, s, true)
		cmd = s[0].cmd
	}

	v, err := cmd.Result()
	if err != nil {
		return 0, err
	}
	if ok, err := need(v); err != nil || !ok {
		return int64(n.replicas), err
	}
	return n.wait(ctx, cn, w)
}

// wait sends WAIT on cn; with cn nil, it reads w, the WAIT that a pipeline carried.
func (n *Node) wait(ctx context.Context, cn *redis.Conn, w *redis.IntCmd) (int64, error) {
	if cn == nil {
		return w.Result()
	}
	return cn.Do(ctx, "WAIT", n.replicas, MS(n.replicaWait)).Int64()
}

// renewAcked is a renewal round under WithReplicaAck: the scripts in one pipeline per master, then
// WAIT on the same connection when any renewed. A renewal the replicas did not acknowledge in time
// fails with an *AckError: the watchdog does not count it, so a holder whose replicas stall loses
// its lock at its validity deadline, before a replica promoted with an older copy can give it away.
func (n *Node) renewAcked(ctx context.Context, items []RenewItem) error {
	groups := map[*redis.Client][]int{}
	var order []*redis.Client
	for i := range items {
		m, err := n.master(ctx, items[i].K.Main)
		if err != nil {
			return err
		}
		if m == nil { // no connection of its own: WAIT in the renewals' pipeline
			return n.renewGroup(ctx, nil, items, nil)
		}
		if groups[m] == nil {
			order = append(order, m)
		}
		groups[m] = append(groups[m], i)
	}

	var errs []error
	for _, m := range order {
		cn := m.Conn()
		errs = append(errs, n.renewGroup(ctx, cn, items, groups[m]))
		_ = cn.Close()
	}
	return errors.Join(errs...)
}

// renewGroup renews items[idx] (every item when idx is nil) over cn and waits for the replicas;
// with cn nil, WAIT travels in the renewals' pipeline.
func (n *Node) renewGroup(ctx context.Context, cn *redis.Conn, items []RenewItem, idx []int) error {
	part := items
	if idx != nil {
		part = make([]RenewItem, len(idx))
		for j, i := range idx {
			part[j] = items[i]
		}
	}

	newPipe := n.rdb.Pipeline
	if cn != nil {
		newPipe = cn.Pipeline
	}
	w, err := n.renewVia(ctx, newPipe, part, cn == nil)

	renewed := func(it RenewItem) bool { return it.OK && it.Err == nil }
	if slices.ContainsFunc(part, renewed) {
		// What each renewal fails with: WAIT's error, or too few acknowledgements.
		acked, werr := n.wait(ctx, cn, w)
		if werr == nil && acked < int64(n.replicas) {
			werr = n.ackError("the renewal", acked)
		}
		for j := range part {
			if renewed(part[j]) {
				part[j].OK, part[j].Err = werr == nil, werr
			}
		}
	}

	for j, i := range idx {
		items[i].OK, items[i].Err = part[j].OK, part[j].Err
	}
	return err
}

// AckError reports that fewer replicas than WithReplicaAck asks for acknowledged a write in time.
type AckError struct {
	what        string // "the lock", "the renewal", "the extension", or "the value" of ReleaseSet
	acked, want int64
	wait        time.Duration
}

func (e *AckError) Error() string {
	msg := fmt.Sprintf("only %d of %d replicas acknowledged %s within %v", e.acked, e.want, e.what, e.wait)
	if e.what == ackedValue {
		msg += ": the value was written and the lock released, but the write may not survive a failover"
	}
	return msg
}

// ackError is the *AckError of what, which only acked replicas acknowledged in time.
func (n *Node) ackError(what string, acked int64) *AckError {
	return &AckError{what: what, acked: acked, want: int64(n.replicas), wait: n.replicaWait}
}

// ErrorType returns "replica_ack": instrumentation counts such errors apart.
func (e *AckError) ErrorType() string { return "replica_ack" }

const ackedValue = "the value"
