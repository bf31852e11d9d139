package core

import (
	"context"
	"log/slog"
)

// WithLogger sets where the Client reports what no caller is told: a release that failed after
// its caller left (Do whose function failed, a hold ended by WithMaxHold, a background give-back),
// the first failed renewal of a held lock, and a lost lock. The default is slog.Default() (read
// when a message is logged); slog.New(slog.DiscardHandler) silences the Client.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger, o.loggerSet = l, true }
}

// log reports msg at level with attrs, unless the Client was given a discarding logger.
func (c *Client) log(level slog.Level, msg string, attrs ...slog.Attr) {
	lg := c.opt.logger
	if !c.opt.loggerSet || lg == nil {
		lg = slog.Default()
	}
	lg.LogAttrs(context.Background(), level, "lockkit: "+msg, attrs...)
}
