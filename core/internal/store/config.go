package store

import "time"

// Config is what a store needs of the Client's options (core/options.go), and how it builds the
// errors core exports.
type Config struct {
	Label       string        // WithLabel: recorded with each fresh acquisition (Inspect)
	Pipeline    int           // WithPipelining: the in-flight calls from which scripts are batched; 0 off
	Replicas    int           // WithReplicaAck: replicas that must acknowledge what a holder counts on
	ReplicaWait time.Duration // and how long to wait for them
	NodeTimeout time.Duration // WithNodeTimeout (Redlock)
	RenewChunk  int           // the most locks one renew_many.lua call renews; 0: RenewChunk (tests and benchmarks set it)
	// Drift is the clock drift allowed for a TTL (Redlock's validity).
	Drift func(ttl time.Duration) time.Duration
	// Invalid builds an error matching core.ErrInvalid; Quorum a *core.QuorumError, from the
	// failed nodes' "address: error" (refused of them refused the command, see Refused).
	Invalid func(format string, args ...any) error
	Quorum  func(op string, nodes, quorum, ok, refused int, failed []string) error
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

// Holder is one holder of a name, as core.HolderInfo reports it (the same fields, in order).
type Holder struct {
	Mode     string
	Digest   string
	Holds    int64
	Fence    int64
	TTL      time.Duration
	Acquired time.Time
	HeldFor  time.Duration
	Host     string
	PID      int
	Label    string
}
