package fencelock

import "context"

// BatchPending returns how many calls wait in the batcher of the master
// that serves the lock name of c (a single deployment's Client): tests
// wait for it to see a batch form.
func BatchPending(c *Client, name string) int {
	n := c.be.(*node)
	b := n.batcher(context.Background(), c.cfg.lockKey(name))
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}
