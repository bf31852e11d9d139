package core

import (
	"context"
	"log/slog"
)

// log reports msg at level with attrs, unless the Client was given a discarding logger.
func (c *Client) log(level slog.Level, msg string, attrs ...slog.Attr) {
	lg := c.opt.logger
	if !c.opt.loggerSet || lg == nil {
		lg = slog.Default()
	}
	lg.LogAttrs(context.Background(), level, "lockkit: "+msg, attrs...)
}
