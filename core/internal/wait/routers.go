package wait

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Router decides where release channels are subscribed: one connection for a plain or Sentinel
// client, the owning master's connection for each channel on a cluster (sharded pub/sub), every
// node's connection for Redlock (each node publishes the release).
type Router interface {
	// route returns the keys of the feeds ch must be subscribed on.
	route(ctx context.Context, ch string) ([]string, error)
	// open returns a new, empty subscription for a feed key.
	open(ctx context.Context, key string) *redis.PubSub
	Sharded() bool
	// refresh reloads the topology, without blocking (a feed broke, e.g. a cluster failover).
	refresh(ctx context.Context)
}

// PlainRouter subscribes everything on one connection of rdb (a plain or Sentinel client).
func PlainRouter(rdb redis.UniversalClient) Router {
	return NewFanRouter([]redis.UniversalClient{rdb})
}

// ClusterRouter subscribes each channel on the master that owns its slot (sharded pub/sub).
func ClusterRouter(rdb *redis.ClusterClient) Router { return clusterRouter{rdb} }

type clusterRouter struct{ rdb *redis.ClusterClient }

func (c clusterRouter) route(ctx context.Context, ch string) ([]string, error) {
	m, err := c.rdb.MasterForKey(ctx, ch)
	if err != nil {
		return nil, err
	}
	return []string{m.Options().Addr}, nil
}

// open returns a sharded subscription; go-redis connects it to the master of the first channel
// subscribed, which route chose.
func (c clusterRouter) open(ctx context.Context, _ string) *redis.PubSub {
	return c.rdb.SSubscribe(ctx)
}
func (c clusterRouter) Sharded() bool               { return true }
func (c clusterRouter) refresh(ctx context.Context) { c.rdb.ReloadState(ctx) }

// fanRouter subscribes every channel on every node (Redlock; a plain client is a fan of one).
type fanRouter struct {
	nodes []redis.UniversalClient
	keys  []string
}

// NewFanRouter subscribes every channel on every node of a Redlock (each node publishes the
// release).
func NewFanRouter(nodes []redis.UniversalClient) Router {
	f := fanRouter{nodes: nodes}
	for i := range nodes {
		f.keys = append(f.keys, strconv.Itoa(i))
	}
	return f
}

func (f fanRouter) route(context.Context, string) ([]string, error) { return f.keys, nil }
func (f fanRouter) open(ctx context.Context, key string) *redis.PubSub {
	i, _ := strconv.Atoi(key)
	return f.nodes[i].Subscribe(ctx)
}
func (f fanRouter) Sharded() bool           { return false }
func (f fanRouter) refresh(context.Context) {}
