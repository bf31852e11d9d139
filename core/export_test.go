package core

// WaitersParked returns how many waiters of c are waiting for a lock (test hook).
func WaitersParked(c *Client) int {
	c.room.mu.Lock()
	defer c.room.mu.Unlock()
	n := 0
	for _, q := range c.room.queues {
		n += q.members
	}
	return n
}

// RenewStats returns how many renewal pipelines c sent and how many scripts they carried.
func RenewStats(c *Client) (pipelines, scripts int64) {
	return c.wd.pipelines.Load(), c.wd.scripts.Load()
}
