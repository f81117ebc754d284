package fencelock

import "github.com/fencelock/fencelock/internal/errs"

var (
	// ErrNotAcquired is returned by TryAcquire when another lease holds the
	// lock, and by Acquire (joined with the context's cause) when its
	// context ends before the lock is free. It is also wrapped when an
	// acquisition is given up, as with ErrNotReplicated.
	ErrNotAcquired = errs.ErrNotAcquired

	// ErrLeaseLost is the cause of a lease's Context when the lease ended
	// without Release: the lock expired, was deleted, passed to another
	// owner, or could not be renewed before the local deadline. Renew and
	// Release return errors wrapping it for such a lease.
	ErrLeaseLost = errs.ErrLeaseLost

	// ErrNotReplicated is returned, together with ErrNotAcquired, when
	// Options.MinReplicas replicas did not acknowledge an acquisition
	// within Options.ReplicaTimeout. The lock was released again.
	ErrNotReplicated = errs.ErrNotReplicated

	// ErrNoQuorum is wrapped by the errors of a quorum Client (NewQuorum)
	// when too few nodes answered to decide by majority: the node errors
	// are joined to it. Nothing was acquired, and what was taken on some
	// nodes was released again.
	ErrNoQuorum = errs.ErrNoQuorum

	// ErrNotHeld is returned by Client.Holder when no lease holds the
	// lock.
	ErrNotHeld = errs.ErrNotHeld

	// ErrNoLeader is returned by Election.Leader when nobody leads the
	// election: its lock is free, or held by a lease that did not
	// campaign.
	ErrNoLeader = errs.ErrNoLeader

	// ErrNotLeader is returned by Election.Proclaim when the Election does
	// not lead; joined with ErrLeaseLost if its leadership was lost.
	ErrNotLeader = errs.ErrNotLeader

	// ErrInvalid is wrapped by every error caused by bad input: an invalid
	// lock name, invalid Options, or a nil client. Nothing is sent to
	// Redis then.
	ErrInvalid = errs.ErrInvalid
)
