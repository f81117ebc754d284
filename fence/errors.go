package fence

import (
	"errors"
	"fmt"
)

var (
	// ErrStale reports that an access was refused because the resource
	// has accepted a newer fence, or a fence of another lock. Errors
	// wrapping it are *StaleError values that carry the current fence.
	ErrStale = errors.New("fence: stale token")

	// ErrInvalid reports a fence that no resource may accept: a token
	// that is not positive, or an empty or non-printable lock name or
	// lease. Parse returns it for malformed text too, and a Store built
	// from invalid arguments (see redisfence.New, sqlfence.New) for every
	// call. Nothing is changed.
	ErrInvalid = errors.New("fence: invalid fence")
)

// StaleError is the error of a refused access. It wraps ErrStale;
// use errors.As to read the fences.
type StaleError struct {
	// Current is the fence the resource had accepted last.
	Current Fence
	// Rejected is the fence of the refused access.
	Rejected Fence
}

func (e *StaleError) Error() string {
	if e.Current.Lock != e.Rejected.Lock {
		// Not a stale holder but two writers under different lock names,
		// which no retry cures: say what does.
		return fmt.Sprintf("%v: resource is fenced by lock %q (current token %d), not %q; "+
			"a resource is bound to the first lock name that writes it: have every writer take lock %q",
			ErrStale, e.Current.Lock, e.Current.Token, e.Rejected.Lock, e.Current.Lock)
	}
	if e.Current.Token == e.Rejected.Token {
		return fmt.Sprintf("%v: token %d belongs to lease %q, not %q (current token %d)",
			ErrStale, e.Current.Token, e.Current.Lease, e.Rejected.Lease, e.Current.Token)
	}
	return fmt.Sprintf("%v: token %d is older than current token %d",
		ErrStale, e.Rejected.Token, e.Current.Token)
}

// Unwrap returns ErrStale.
func (e *StaleError) Unwrap() error { return ErrStale }
