package core

import "time"

// SetEvictionEvery sets how often c's eviction check looks for masters it has not checked
// (default evictionEvery). Call it before c's first acquisition.
func SetEvictionEvery(c *Client, d time.Duration) { c.evict.every = d }
