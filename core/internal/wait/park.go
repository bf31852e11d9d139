package wait

// Parked says why Park returned.
type Parked uint8

const (
	// Woken: a release woke the waiter, or (Ready) its subscription was confirmed.
	Woken Parked = iota
	// Elapsed: the delay passed.
	Elapsed
	// Cancelled: the context ended.
	Cancelled
	// Deadline: the call's wait limit passed (its timer fires once: the call must end).
	Deadline
	// Closed: the Queues closed.
	Closed
)
