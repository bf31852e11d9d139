package script

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Sender sends script calls over a Runner and keeps the hashes by which EVALSHA names the scripts
// there. The servers compute them (lua/sha1hex.lua, sent with EVAL, or EVAL_RO for a read-only
// script: the commands the caller's ACL grants for the script itself): lockkit's client computes
// no SHA-1, so that it runs in FIPS 140-only mode (GODEBUG=fips140=only), where crypto/sha1
// panics. A hash is asked for once per script per Sender, at its first call; a call that finds
// another one asking is sent as EVAL meanwhile, and a failed question is asked again by the next
// call. Hold one Sender per client (the hashes are the same on every server, but a Sender learns
// them from its own). Safe for concurrent use.
type Sender struct {
	r Runner
	h *hashes
}

// hashes holds a Sender's hashes, by Script.id; shared by the Senders Via makes of it.
type hashes struct {
	sha      []atomic.Pointer[any] // the hash, boxed once
	learning []atomic.Bool         // a call is asking for the hash
}

// NewSender returns a Sender over r (a go-redis client, or a pipe.Sender over one).
func NewSender(r Runner) *Sender {
	n := len(Scripts().All())
	return &Sender{r: r, h: &hashes{sha: make([]atomic.Pointer[any], n), learning: make([]atomic.Bool, n)}}
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

// Hash returns the hash s's servers gave for sc, if s has it.
func (s *Sender) Hash(sc *Script) (string, bool) {
	p := sc.sha
	if p == nil {
		p = s.h.sha[sc.id].Load()
	}
	if p == nil {
		return "", false
	}
	return (*p).(string), true
}

// hash returns sc's hash, boxed, asking s's server for it the first time; nil when another call is
// asking for it or the server did not answer (the caller sends EVAL instead).
func (s *Sender) hash(ctx context.Context, sc *Script) *any {
	if sc.sha != nil {
		return sc.sha // computed when the scripts changed (hashes.go): no question to the server
	}
	if p := s.h.sha[sc.id].Load(); p != nil {
		return p
	}
	if !s.h.learning[sc.id].CompareAndSwap(false, true) {
		return nil
	}
	defer s.h.learning[sc.id].Store(false)
	cmd := "eval"
	if sc.ReadOnly {
		cmd = "eval_ro"
	}
	sha, err := ask(ctx, s.r, cmd, sc.Source)
	if err != nil {
		return nil
	}
	var v any = sha
	s.h.sha[sc.id].Store(&v)
	return &v
}

// Digest returns the SHA-1 (hex) of text, computed by the server behind r (EVAL of
// lua/sha1hex.lua): the digest by which release messages name a waiter's token.
func Digest(ctx context.Context, r Runner, text string) (string, error) {
	if s, ok := r.(*Sender); ok {
		r = s.r
	}
	return ask(ctx, r, "eval", text)
}

// ask sends lua/sha1hex.lua with cmd (EVAL or EVAL_RO) for text and checks the reply.
func ask(ctx context.Context, r Runner, cmd, text string) (string, error) {
	c := redis.NewStringCmd(ctx, cmd, sha1hex(), 0, text)
	if err := r.Process(ctx, c); err != nil {
		return "", err
	}
	sha := c.Val()
	if !isSHA1Hex(sha) {
		return "", errNotSHA1{sha}
	}
	return sha, nil
}

// isSHA1Hex reports whether s is 40 lower-case hex digits.
func isSHA1Hex(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// errNotSHA1 is a reply to sha1hex.lua that is not a SHA-1.
type errNotSHA1 struct{ reply string }

func (e errNotSHA1) Error() string {
	return "lockkit: sha1hex.lua answered " + e.reply + ", not a SHA-1"
}
