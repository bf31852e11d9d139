package script

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Sender sends script calls over a Runner as EVALSHA, with the hashes by which Redis names the
// scripts (hashes.go, computed when the scripts change: the client computes no SHA-1, so that it
// runs in FIPS 140-only mode, where crypto/sha1 panics); a script hashes.go lacks goes as EVAL.
// Safe for concurrent use.
type Sender struct{ r Runner }

// NewSender returns a Sender over r (a go-redis client, or a pipe.Sender over one).
func NewSender(r Runner) *Sender { return &Sender{r: r} }

// Process sends cmd with the Runner under s.
func (s *Sender) Process(ctx context.Context, cmd redis.Cmder) error { return s.r.Process(ctx, cmd) }

// Via returns a Runner that sends over another Runner (a connection of r's client) as r does: a
// Sender, if r is one; otherwise over.
func Via(r, over Runner) Runner {
	if _, ok := r.(*Sender); ok {
		return &Sender{r: over}
	}
	return over
}

// Digest returns the SHA-1 (hex) of text, computed by the server behind r (EVAL of
// lua/sha1hex.lua): the digest by which release messages name a waiter's token. It checks that
// the reply is 40 lower-case hex digits.
func Digest(ctx context.Context, r Runner, text string) (string, error) {
	c := redis.NewStringCmd(ctx, "eval", sha1hex(), 0, text)
	if err := r.Process(ctx, c); err != nil {
		return "", err
	}
	sha := c.Val()
	if len(sha) != 40 || strings.Trim(sha, "0123456789abcdef") != "" {
		return "", fmt.Errorf("lockkit: sha1hex.lua answered %s, not a SHA-1", sha)
	}
	return sha, nil
}
