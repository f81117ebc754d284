// Package fence is the resource side of fencing: it decides, atomically
// with each access, whether a request carrying a fencing token may touch a
// protected resource.
//
// A lock lease can end at any moment without its holder knowing. The
// holder therefore sends the lease's Fence with every state-changing
// access, and the resource accepts it only if its token is not older than
// the greatest it has accepted. A resource that cannot compare and persist
// tokens atomically with the access itself cannot be protected this way:
// a check followed by a separate write lets a stale holder slip in between.
//
// This package does not import the lock: resources usually live in other
// services that only need the check.
package fence

// Fence identifies one lease of one lock: the lock's name, the fencing
// token issued with the lease, and the lease's public ID. Tokens of
// different locks are never compared.
type Fence struct {
	// Lock is the name of the lock that issued Token.
	Lock string
	// Token strictly increases each time Lock is acquired. It is > 0.
	Token int64
	// Lease is the public ID of the lease; it reveals nothing that would
	// allow releasing or renewing the lock.
	Lease string
}
