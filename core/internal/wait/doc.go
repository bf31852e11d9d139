// Package wait is the wake-up machinery of a core.Client: the queues of local waiters per release
// channel (Queues), the pub/sub subscriptions that feed them (one connection for a plain client,
// one per master on a cluster, one per node for Redlock: Router), the grants that fair locks and
// semaphores hand to a named waiter (Grant), and Redlock's counting of a release's copies.
//
// It knows nothing of locks: core tells it which channel a waiter waits on and whether it is fair,
// and reads back wake-ups, grants and subscription state.
package wait
