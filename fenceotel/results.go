package fenceotel

import (
	"errors"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
)

// Results, the values of the "fencelock.result" and "fence.result"
// attributes: the same words as fenceprom's "result" labels.
const (
	resultAcquired      = "acquired"
	resultNotAcquired   = "not_acquired"
	resultNotReplicated = "not_replicated"
	resultOK            = "ok"
	resultLost          = "lost"
	resultError         = "error"
	resultAccepted      = "accepted"
	resultStale         = "stale"
)

func acquireResult(err error) string {
	switch {
	case err == nil:
		return resultAcquired
	case errors.Is(err, fencelock.ErrNotReplicated):
		return resultNotReplicated
	case errors.Is(err, fencelock.ErrNotAcquired):
		return resultNotAcquired
	}
	return resultError
}

// leaseResult is the result of a renewal or release.
func leaseResult(err error) string {
	switch {
	case err == nil:
		return resultOK
	case errors.Is(err, fencelock.ErrLeaseLost):
		return resultLost
	}
	return resultError
}

func accessResult(err error) string {
	switch {
	case err == nil:
		return resultAccepted
	case errors.Is(err, fence.ErrStale):
		return resultStale
	}
	return resultError
}
