package core

import (
	"fmt"
	"strings"

	"github.com/lockkit/lockkit/core/internal/store"
	"github.com/lockkit/lockkit/core/internal/wait"
	"github.com/redis/go-redis/v9"
)

// NewRedlock returns a Client whose locks live on a quorum of independent Redis nodes (the Redlock
// algorithm): an acquisition succeeds on N/2+1 nodes within its validity (TTL − elapsed − drift);
// renewals need a quorum; releases go to every node. Requests to the nodes run in parallel, each
// bounded by the per-node timeout (WithNodeTimeout), so a slow or dead node costs at most that; and
// Acquire, Release and Extend return once a quorum has answered, so a slow node usually costs
// nothing. (The slower nodes' grants are kept after a successful acquisition, and their releases
// finish in the background; a release goes to such a node only once the acquisition's request to
// it returned.) The requests run on worker goroutines that the Client reuses from one request to
// the next; a worker exits after one to two seconds without work, or on Close.
// The API is the same as New's, except Fair (not supported: each node would keep its own queue).
//
// Fencing tokens stay monotonic across quorums: the fence is the maximum of the quorum's counters,
// and before Acquire returns it is written back (counter = max(counter, fence)) to a quorum unless a
// quorum already had it. This holds as long as nodes keep their data: run them with persistence
// (appendonly yes, appendfsync always) or a restarted node may hand out an old fence.
func NewRedlock(nodes []redis.UniversalClient, opts ...Option) (*Client, error) {
	if len(nodes) == 0 {
		return nil, invalid("redlock needs at least one node")
	}
	for i, n := range nodes {
		if isNil(n) {
			return nil, invalid("redlock node %d is nil", i)
		}
		if _, ok := n.(*redis.ClusterClient); ok {
			return nil, invalid("redlock node %d is a cluster client; use independent masters", i)
		}
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	id := wait.ClientIDPrefix + store.NewToken()[:16]
	rl := store.NewRedlock(nodes, id, o.store())
	return newClient(rl, o, id, rl.Quorum()), nil
}

// Error summarises the failure and why each failed node failed.
func (e *QuorumError) Error() string {
	return fmt.Sprintf("lockkit: redlock %s: %d of %d nodes succeeded, %d needed; failed: %s",
		e.Op, e.OK, e.Nodes, e.Quorum, strings.Join(e.Errs, "; "))
}

// Unwrap returns ErrUnavailable, which gives the error its ErrorType.
func (e *QuorumError) Unwrap() error { return ErrUnavailable }
