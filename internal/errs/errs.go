// Package errs holds the sentinel errors that the internal packages
// return and the root package exports, documented there
// (fencelock.ErrNotAcquired is errs.ErrNotAcquired, and so on): one value
// each, so that errors.Is sees them through any wrapping.
package errs

import (
	"errors"
	"strings"
)

var (
	ErrNotAcquired   = errors.New("fencelock: not acquired")
	ErrLeaseLost     = errors.New("fencelock: lease lost")
	ErrNotReplicated = errors.New("fencelock: not replicated")
	ErrNoQuorum      = errors.New("fencelock: no quorum of nodes answered")
	ErrNotHeld       = errors.New("fencelock: not held")
	ErrNoLeader      = errors.New("fencelock: no leader")
	ErrNotLeader     = errors.New("fencelock: not the leader")
	ErrInvalid       = errors.New("fencelock: invalid argument")
)

// Join returns an error that wraps the non-nil errs, as errors.Join does
// (errors.Is and errors.As see each of them), but reads on one line, its
// parts separated by "; ": a log line stays one line. Nil if every err is
// nil.
func Join(errs ...error) error {
	var j joined
	for _, err := range errs {
		if err != nil {
			j = append(j, err)
		}
	}
	if len(j) == 0 {
		return nil
	}
	return j
}

type joined []error

func (j joined) Error() string {
	s := make([]string, len(j))
	for i, err := range j {
		s[i] = err.Error()
	}
	return strings.Join(s, "; ")
}

func (j joined) Unwrap() []error { return j }
