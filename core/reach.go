package core

import (
	"context"
	"errors"
	"log/slog"

	"github.com/lockkit/lockkit/core/internal/store"
)

// reach records what a request's error (nil: it succeeded) says about Redis: it answered (a
// reply, an error reply), or it could not be reached (no connection, a broken one, a network
// timeout; over Redlock, too few nodes answered). An ended context says nothing. The first request
// that finds Redis gone logs one line, and the first that finds it back another: an outage is two
// lines in the log, not one per request (go-redis logs its failed dials itself: see
// docs/troubleshooting.md).
func (c *Client) reach(err error) {
	var down bool
	switch {
	case err == nil:
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return
	default:
		down = unreached(err)
	}
	if c.down.Load() == down || !c.down.CompareAndSwap(!down, down) {
		return
	}
	if down {
		c.log(slog.LevelWarn, "cannot reach Redis; calls fail with ErrUnavailable until it answers again (said once)",
			slog.Any("error", err))
	} else {
		c.log(slog.LevelInfo, "Redis answers again")
	}
}

// unreached reports whether err says Redis could not be reached (a function of its own: errors.As's
// target escapes, and reach must not allocate for a request that succeeded).
func unreached(err error) bool {
	var q *QuorumError
	return store.Unreached(err) || (errors.As(fromStore(err), &q) && errors.Is(q, ErrUnavailable))
}
