package core

// WaitersParked returns how many waiters of c are waiting for a lock (test hook).
func WaitersParked(c *Client) int {
	return c.room.parked()
}

// RenewStats returns how many renewal pipelines c sent and how many scripts they carried.
func RenewStats(c *Client) (pipelines, scripts int64) {
	return c.wd.pipelines.Load(), c.wd.scripts.Load()
}
