// Package election is leader election over lockkit locks, on the model of etcd's
// concurrency.Election: Campaign waits until the caller leads, Term.Resign gives leadership up,
// Observe reports each change of leader.
//
// Leadership is a lockkit lock ("@election/NAME", in namespace "election", which no other lock name can reach) held by the leader and renewed by the Client's
// watchdog. So the leader's Term.Context is cancelled when leadership is lost (renewals failed
// until the lock's validity deadline, or it was taken away) before anyone else can lead, and each
// term has a fence (Term.Fence) that is larger than every earlier term's: pass it to the resources
// the leader writes to so that they reject a deposed leader's late writes. Followers wait in
// Campaign without polling: the leader's release wakes one of them through the Client's release
// subscription.
//
// A term lasts until it is resigned or lost: a Client's core.WithDefaultMaxHold does not apply to
// it; WithMaxTerm bounds it.
//
// The leader's value is stored in its lock's value (after the lock's own fields), so it expires,
// is renewed and is deleted with the lock, and is announced on the channel PREFIX{@election/NAME}:leader
// (SPUBLISH on a cluster). Observers subscribe to that channel and to the lock's release channel,
// and read the lock when its TTL runs out (a leader that died announces nothing). Observe reports
// leaders in fence order, every proclaimed term while its subscription is healthy (see Observe
// for what it may skip otherwise).
//
// An Election needs the go-redis client its core.Client was made with (New, not NewRedlock).
package election
