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
// # The rule
//
// Each resource remembers the last Fence it accepted. An access carrying
// fence F is accepted only if
//
//   - F.Lock equals the stored lock name (or nothing is stored yet), and
//   - F.Token is greater than the stored token, or equal to it with the
//     same Lease (one holder accessing many times).
//
// On acceptance the stored fence becomes F, in the same atomic step as the
// access. Otherwise nothing changes and the error wraps ErrStale and is a
// *StaleError that tells the current fence. Check applies the rule; every
// Store applies it.
//
// Reads the holder will act on (read-modify-write) must be fenced too: a
// fenced read records F, so an older holder cannot write after a newer
// one has read. Unfenced reads only observe.
//
// # What fencing cannot do
//
// A resource that cannot both compare and persist tokens in the same
// atomic step as the access (a plain file, a mail server, a payment API
// without idempotency keys, a device) cannot be protected from a holder
// whose lease has ended: such a holder may still act after a newer holder
// has, and nothing in this package can undo that. Put such a resource
// behind a service that does the check (see package httpfence, whose
// middleware serialises check and handler within one process), or make the
// effect idempotent. Fencing also says nothing about resources that are
// changed without a fence: every writer must send one.
//
// This package does not import the lock: resources usually live in other
// services that only need the check.
package fence

import (
	"fmt"
)

// Fence identifies one lease of one lock: the lock's name, the fencing
// token issued with the lease, and the lease's public ID. Tokens of
// different locks are never compared.
//
// Its text form (String, Parse) travels in HTTP headers and environment
// variables.
type Fence struct {
	// Lock is the name of the lock that issued Token.
	Lock string
	// Token strictly increases each time Lock is acquired. It is > 0.
	Token int64
	// Lease is the public ID of the lease; it reveals nothing that would
	// allow releasing or renewing the lock.
	Lease string
}

// Validate reports whether f can be sent to a resource: Token must be
// positive, and Lock and Lease non-empty printable ASCII (space through
// tilde), which keeps them safe in headers, SQL text columns and logs.
// The error wraps ErrInvalid.
func (f Fence) Validate() error {
	switch {
	case f.Token <= 0:
		return fmt.Errorf("%w: token %d is not positive", ErrInvalid, f.Token)
	case f.Lock == "":
		return fmt.Errorf("%w: empty lock name", ErrInvalid)
	case f.Lease == "":
		return fmt.Errorf("%w: empty lease", ErrInvalid)
	case !printable(f.Lock):
		return fmt.Errorf("%w: lock name %q is not printable ASCII", ErrInvalid, f.Lock)
	case !printable(f.Lease):
		return fmt.Errorf("%w: lease %q is not printable ASCII", ErrInvalid, f.Lease)
	}
	return nil
}

// Check applies the rule to one access: it returns nil if a resource whose
// last accepted fence is current (the zero Fence if it has accepted none)
// may accept f. Otherwise it returns an error wrapping ErrInvalid, or a
// *StaleError. A Store must call it, or do the same comparison, in the
// same atomic step as the access and the recording of f.
func Check(current, f Fence) error {
	if err := f.Validate(); err != nil {
		return err
	}
	switch {
	case current == Fence{}:
		return nil
	case f.Lock != current.Lock:
	case f.Token > current.Token:
		return nil
	case f.Token == current.Token && f.Lease == current.Lease:
		return nil
	}
	return &StaleError{Current: current, Rejected: f}
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
