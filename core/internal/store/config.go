package store

import "time"

// Config is what a store needs of the Client's options (core/options.go).
type Config struct {
	Label       string        // WithLabel: recorded with each fresh acquisition (Inspect)
	Pipeline    int           // WithPipelining: the in-flight calls from which scripts are batched; 0 off
	Replicas    int           // WithReplicaAck: replicas that must acknowledge what a holder counts on
	ReplicaWait time.Duration // and how long to wait for them
	NodeTimeout time.Duration // WithNodeTimeout (Redlock)
	RenewChunk  int           // the most locks one renew_many.lua call renews; 0: RenewChunk (tests and benchmarks set it)
	// Drift is the clock drift allowed for a TTL (Redlock's validity).
	Drift func(ttl time.Duration) time.Duration
}

// Info is what inspect.lua reads about a name, as core.LockInfo reports it (see its fields).
type Info struct {
	Held          bool
	Mode          string
	Holders       []Holder
	TTL           time.Duration
	Fence         int64
	Queued        int
	Permits       []Holder
	Limit         int
	PermitsQueued int
	Readers       []Holder
	Writer        *Holder
	RWQueued      int
}

// Holder is one holder of a lock or of a semaphore's permit, as inspect.lua reads it. core
// exports it as HolderInfo (an alias).
type Holder struct {
	// Mode is the kind of this hold: "lock", "write", "read" or "permit" (see LockInfo.Mode).
	Mode string
	// Digest identifies the owner without revealing its token (which would let anybody release
	// the lock): the first 12 hex digits of the SHA-256 of the token. A holder can log the same
	// digest of its Lock.Token to be found by it.
	Digest string
	// Holds is the owner's hold count (more than 1 when re-entered).
	Holds int64
	// Fence and TTL are the holder's fencing token and remaining TTL (for a lock, LockInfo's).
	Fence int64
	TTL   time.Duration
	// Acquired is when the owner took the lock, by the Redis server's clock, and HeldFor how long
	// ago that was, by the same clock. Zero when unknown (taken by an older lockkit version).
	Acquired time.Time
	HeldFor  time.Duration
	// Host and PID name the holder's process; Label is its Client's WithLabel.
	Host  string
	PID   int
	Label string
}
