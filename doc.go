// Package fencelock implements locks kept in Redis whose every acquisition
// comes with a fencing token: a number that strictly increases each time
// the same lock is acquired.
//
// A lock from this package is a lease, not proof that its holder is still
// authorized. It can end at any moment (the process pauses, the network
// partitions, Redis fails over or restarts) and the holder may learn of it
// too late. The holder therefore sends the lease's Fence with every write,
// and the protected resource rejects a token older than the greatest it
// has accepted; package fence implements that side. Mutual exclusion is
// only as strong as the resource's check: a resource that cannot compare
// and persist tokens atomically with the write cannot be protected.
//
// # Tokens
//
// The token is issued in the same Lua script that takes the lock, as
// max(stored+1, server time in microseconds). The clock floor keeps tokens
// increasing when the counter is lost (a restart without persistence,
// eviction, a failover to a replica that had not received it), as long as
// the new server's clock is not behind the old one by more than the
// outage lasted.
//
// # Leases
//
// A lease is renewed in the background every Options.RenewInterval. Its
// Context is cancelled, with a cause wrapping ErrLeaseLost, as soon as a
// renewal finds the lock gone or held by another owner, or when its local
// Deadline passes without a successful renewal. Release deletes the lock
// only if this lease still holds it.
//
// # Servers
//
// Redis 7.0 or newer, or Valkey 9.0 or newer: the releases the tests run
// on (docs/operations.md, "Tested servers"), standalone, under Sentinel or as a
// Cluster. Owner-checked native commands are used where a server has
// them (Redis 8.4, Valkey 9.0), Lua scripts elsewhere.
//
// # Errors
//
// Errors wrap the sentinels ErrNotAcquired, ErrLeaseLost, ErrNotReplicated,
// ErrNoQuorum and ErrInvalid, to be tested with errors.Is. Context errors are joined,
// and Redis errors wrapped, never turned into ErrNotAcquired.
package fencelock
