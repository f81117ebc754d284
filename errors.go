package fencelock

import "errors"

var (
	// ErrNotAcquired is returned by TryAcquire when another lease holds the
	// lock, and by Acquire (joined with the context's cause) when its
	// context ends before the lock is free. It is also wrapped when an
	// acquisition is given up, as with ErrNotReplicated.
	ErrNotAcquired = errors.New("fencelock: not acquired")

	// ErrLeaseLost is the cause of a lease's Context when the lease ended
	// without Release: the lock expired, was deleted, passed to another
	// owner, or could not be renewed before the local deadline. Renew and
	// Release return errors wrapping it for such a lease.
	ErrLeaseLost = errors.New("fencelock: lease lost")

	// ErrNotReplicated is returned, together with ErrNotAcquired, when
	// Options.MinReplicas replicas did not acknowledge an acquisition
	// within Options.ReplicaTimeout. The lock was released again.
	ErrNotReplicated = errors.New("fencelock: not replicated")

	// ErrNoQuorum is wrapped by the errors of a quorum Client (NewQuorum)
	// when too few nodes answered to decide by majority: the node errors
	// are joined to it. Nothing was acquired, and what was taken on some
	// nodes was released again.
	ErrNoQuorum = errors.New("fencelock: no quorum of nodes answered")

	// ErrNotHeld is returned by Client.Holder when no lease holds the
	// lock.
	ErrNotHeld = errors.New("fencelock: not held")

	// ErrNoLeader is returned by Election.Leader when nobody leads the
	// election: its lock is free, or held by a lease that did not
	// campaign.
	ErrNoLeader = errors.New("fencelock: no leader")

	// ErrNotLeader is returned by Election.Proclaim when the Election does
	// not lead; joined with ErrLeaseLost if its leadership was lost.
	ErrNotLeader = errors.New("fencelock: not the leader")

	// ErrInvalid is wrapped by every error caused by bad input: an invalid
	// lock name, invalid Options, or a nil client. Nothing is sent to
	// Redis then.
	ErrInvalid = errors.New("fencelock: invalid argument")
)
