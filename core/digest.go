package core

import (
	"context"
	"errors"

	"github.com/lockkit/lockkit/core/internal/store"
)

// learnDigest names the call's waiter with its token's digest, asking the server for it once per
// call. Without an answer the waiter stays unnamed and polls (as a waiter that missed a message
// does); it returns an error only when ctx ended.
func (wc *waitCall) learnDigest(ctx context.Context) error {
	if wc.w == nil || !wc.w.Unnamed() {
		return nil
	}
	if wc.digest == "" {
		d, err := wc.c.tokenDigest(ctx, wc.l.token)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return wc.notAcquired(cerr)
			}
			return nil
		}
		wc.digest = d
	}
	wc.c.room.Named(wc.w, wc.digest)
	return nil
}

// tokenDigest asks the server for the SHA-1 (hex) of token.
func (c *Client) tokenDigest(ctx context.Context, token string) (string, error) {
	n, ok := c.st.(*store.Node)
	if !ok {
		return "", errors.New("lockkit: no Redis-side queue on this store") // (fair mode and permits run on one node)
	}
	return n.Digest(ctx, token)
}
