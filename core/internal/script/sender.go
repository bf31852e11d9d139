package script

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Sender sends script calls over a Runner and keeps the hashes by which EVALSHA names the scripts
// there. The servers compute them (lua/sha1hex.lua, sent as the script itself would be, EVAL or
// EVAL_RO, which the caller's ACL grants): the client computes no SHA-1, so that it runs in FIPS
// 140-only mode, where crypto/sha1 panics. A hash is asked for once per script per Sender; calls
// meanwhile are sent as EVAL, and a failed question is asked again by the next call. Hold one
// Sender per client. Safe for concurrent use.
type Sender struct {
	r Runner
	h hashes
}

// hashes holds a Sender's hashes, by Script.id; shared by the Senders Via makes of it.
type hashes []struct {
	sha      atomic.Pointer[any] // the hash, boxed once
	learning atomic.Bool         // a call is asking for the hash
}

// NewSender returns a Sender over r (a go-redis client, or a pipe.Sender over one).
func NewSender(r Runner) *Sender {
	return &Sender{r: r, h: make(hashes, len(Scripts().All()))}
}

// Process sends cmd with the Runner under s.
func (s *Sender) Process(ctx context.Context, cmd redis.Cmder) error { return s.r.Process(ctx, cmd) }

// Via returns a Runner that sends over another Runner (a connection of r's client) with r's hashes,
// if r is a Sender; otherwise over.
func Via(r, over Runner) Runner {
	if s, ok := r.(*Sender); ok {
		return &Sender{r: over, h: s.h}
	}
	return over
}

// known returns sc's hash, boxed: from hashes.go, computed when the scripts changed, or as s's
// servers gave it; nil when s has none yet.
func (s *Sender) known(sc *Script) *any {
	if sc.sha != nil {
		return sc.sha
	}
	return s.h[sc.id].sha.Load()
}

// hash returns sc's hash, boxed, asking s's server for it the first time; nil when another call is
// asking for it or the server did not answer (the caller sends EVAL instead).
func (s *Sender) hash(ctx context.Context, sc *Script) *any {
	if p := s.known(sc); p != nil {
		return p
	}
	if !s.h[sc.id].learning.CompareAndSwap(false, true) {
		return nil
	}
	defer s.h[sc.id].learning.Store(false)

	sha, err := ask(ctx, s.r, sc.eval, sc.Source)
	if err != nil {
		return nil
	}
	var v any = sha
	s.h[sc.id].sha.Store(&v)
	return &v
}

// Digest returns the SHA-1 (hex) of text, computed by the server behind r (EVAL of
// lua/sha1hex.lua): the digest by which release messages name a waiter's token.
func Digest(ctx context.Context, r Runner, text string) (string, error) {
	return ask(ctx, r, "eval", text)
}

// ask sends lua/sha1hex.lua with cmd (EVAL or EVAL_RO) for text and checks that the reply is 40
// lower-case hex digits.
func ask(ctx context.Context, r Runner, cmd any, text string) (string, error) {
	c := redis.NewStringCmd(ctx, cmd, sha1hex(), 0, text)
	if err := r.Process(ctx, c); err != nil {
		return "", err
	}
	sha := c.Val()
	if len(sha) != 40 || strings.Trim(sha, "0123456789abcdef") != "" {
		return "", fmt.Errorf("lockkit: sha1hex.lua answered %s, not a SHA-1", sha)
	}
	return sha, nil
}
