package main

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Who waits for a name. Redis knows two kinds of waiter: those queued in its keys (a lock's fair
// waiters, every permit waiter, every read-write waiter: LockInfo's Queued, PermitsQueued,
// RWQueued) and, for every waiter, fair or not, the subscription of its process to the name's
// release channel (docs/keys.md). A waiter that is not fair waits in its own process, where Redis
// cannot count it: ls, inspect and watch count the processes subscribed to the name's release
// channels instead (PUBSUB NUMSUB, SHARDNUMSUB on a cluster). A process counts once however many of
// its goroutines wait (they share one subscription), and keeps its subscription 3 s after its last
// waiter of the name (core/internal/wait: idleAfter), so the count is of the processes waiting or
// that waited within the last 3 s. A "lockkit watch" of the name subscribes to its three channels,
// a waiter to one (its kind's): a process on all three counts as a watch, not a waiter (so one lock
// waiter, one permit waiter and one read-write waiter of a name at once would count as a watch).

// releaseChannels returns the release channels of a name: its lock's, its semaphore's, its
// read-write lock's.
func releaseChannels(prefix, name string) []string {
	base := prefix + "{" + name + "}"
	return []string{base + ":released", base + ":permits:released", base + ":rw:released"}
}

// subscribed returns how many processes are subscribed to a name's release channels (of one
// cluster slot), not counting own subscriptions to each (watch's own) nor the watches of the name.
func subscribed(ctx context.Context, rdb redis.UniversalClient, chans []string, own int) (int, error) {
	var (
		n   map[string]int64
		err error
	)
	if cl, ok := rdb.(*redis.ClusterClient); ok {
		// Sharded channels are counted by the master of their slot (the name's hash tag), which
		// go-redis does not pick for PUBSUB by itself.
		var m *redis.Client
		if m, err = cl.MasterForKey(ctx, chans[0]); err != nil {
			return 0, err
		}
		n, err = m.PubSubShardNumSub(ctx, chans...).Result()
	} else {
		n, err = rdb.PubSubNumSub(ctx, chans...).Result()
	}
	if err != nil {
		return 0, err
	}
	subs, watches := 0, -1
	for _, c := range chans {
		k := max(int(n[c])-own, 0)
		subs += k
		if watches < 0 || k < watches {
			watches = k
		}
	}
	return subs - len(chans)*watches, nil
}

// waitingProcesses returns how many processes are subscribed to the name's release channels, or -1
// after saying on stderr why they could not be counted (a user without +pubsub|numsub, say): ls and
// inspect show the rest.
func waitingProcesses(ctx context.Context, e *env, rdb redis.UniversalClient, name string) int {
	n, err := subscribed(ctx, rdb, releaseChannels(e.prefix, name), 0)
	if err != nil {
		fmt.Fprintf(e.errOut, "lockkit: cannot count the processes waiting for %s (PUBSUB NUMSUB): %v\n", name, err)
		return -1
	}
	return n
}
