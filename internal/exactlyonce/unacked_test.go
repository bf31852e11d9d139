package exactlyonce_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/exactlyonce"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// Issue #27 (WithReplicaAck settled): a record whose store the replicas did not acknowledge is
// stored and the caller gets its answer, but a failover may lose it and run the work again. That
// is logged at error level (and core's Released hook carries an error of type "replica_ack", which
// lockotel counts).
func TestStore_unacknowledgedRecord_loggedAsError(t *testing.T) {
	srvs := redistest.StartN(t, 2)
	master, replica := srvs[0], srvs[1]
	replica.Do(t, "REPLICAOF", "127.0.0.1", strconv.Itoa(master.Port()))
	locktest.Eventually(t, 20*time.Second, "replica in sync", func() bool {
		info, _ := master.Do(t, "INFO", "replication").(string)
		return strings.Contains(info, "state=online")
	})
	var released []error
	hook := core.Hook{Released: func(_ context.Context, h core.HoldInfo) { released = append(released, h.Err) }}
	locks := locktest.NewClient(t, master.Client(t), core.WithReplicaAck(1, 2*time.Second), core.WithHook(hook)) // (generous: a loaded host acknowledges late)
	var logs bytes.Buffer
	s := newStore(t, locks, exactlyonce.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := context.Background()
	key := s.Key("POST", "/orders", "alice", "k1")
	run, _, err := s.Begin(ctx, &exactlyonce.Request{Key: key, Fingerprint: fp("pizza")})
	if err != nil {
		t.Fatal(err)
	}
	replica.Pause(t)
	defer replica.Resume(t)
	err = run.Store(ctx, exactlyonce.Encode('x', sha256.Sum256([]byte("pizza")), []byte("201")), 0)
	if !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Store with the replica stalled: %v, want ErrUnavailable", err)
	}
	if master.Do(t, "EXISTS", key.Record()) != int64(1) {
		t.Fatal("the record was not stored on the master")
	}
	out := logs.String()
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "not acknowledged by the replicas") {
		t.Fatalf("log %q: want an error-level line about the unacknowledged record", out)
	}
	var et interface{ ErrorType() string }
	if len(released) != 1 || !errors.As(released[0], &et) || et.ErrorType() != "replica_ack" {
		t.Fatalf("Released hook errors %v: want one of type replica_ack", released)
	}
}
