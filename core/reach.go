package core

import (
	"context"
	"errors"
	"log/slog"

	"github.com/lockkit/lockkit/core/internal/store"
)

// reach records whether a request's error (nil: it succeeded) says that Redis answered or could
// not be reached (over Redlock: too few nodes answered); an ended context says nothing. An outage
// is two lines in the log, when it starts and when it ends, not one per request.
func (c *Client) reach(err error) {
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return
	}
	q, quorum := errors.AsType[*QuorumError](fromStore(err))
	down := err != nil && (store.Unreached(err) || quorum && errors.Is(q, ErrUnavailable))
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
