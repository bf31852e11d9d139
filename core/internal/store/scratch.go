package store

import (
	"sync"

	"github.com/lockkit/lockkit/core/internal/script"
)

// Scratch is what one acquisition or release of a plain lock needs only while it runs: the acquire
// request, its TTL argument and the rooms of the command lines (Keys.Lines). Pooled, so that a lock
// + unlock allocates none of it and a held lock keeps none of it (issue #38).
type Scratch struct {
	Req   AcquireReq
	TTLMS int64
	Lines script.Lines
}

// Scratches pools the Scratch of one Client's calls.
type Scratches struct {
	off bool // over Redlock (Caps.Undoes): none
	p   sync.Pool
}

// NewScratches returns the pool for a Client over st.
func NewScratches(st Store) *Scratches { return &Scratches{off: st.Caps().Undoes} }

// Take returns a Scratch with free rooms, or nil over Redlock: a request to a node may still be on
// its way when the call returns at a quorum, and must not find its command line reused.
func (s *Scratches) Take() *Scratch {
	if s.off {
		return nil
	}
	sc, _ := s.p.Get().(*Scratch)
	if sc == nil {
		return new(Scratch)
	}
	sc.Lines.Reset()
	return sc
}

// Put gives sc back for another call when done says that every command built in it was answered;
// otherwise (a reply lost, or a command left in a pipeline when its context ended) the command may
// still be sent from it, and sc is left to the garbage collector.
func (s *Scratches) Put(sc *Scratch, done bool) {
	if sc == nil || !done {
		return
	}
	sc.Req = AcquireReq{}
	s.p.Put(sc)
}
