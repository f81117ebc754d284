package fencelock

import (
	"context"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/internal/node"
)

// MaxSecretLen bounds the owner secret that Attach accepts, in bytes.
const MaxSecretLen = node.MaxSecretLen

// Secret returns the lease's owner value. It is a secret: whoever knows it
// can renew and release the lock (see Client.Attach), so never log it,
// print it where others can read it, or pass it on a command line. Use ID
// to name the lease instead.
func (l *Lease) Secret() string { return l.ref.Owner }

// Attach rebuilds a handle for a lease acquired elsewhere, for example by
// another process of the same shell script, from the lock name, the
// lease's Secret and its Token. It sends nothing to Redis: whether the
// lease still holds the lock is learnt by Renew or Release, which work as
// for an acquired lease (owner-checked, wrapping ErrLeaseLost when the lock
// is gone or held by another owner).
//
// The returned lease is never renewed in the background, whatever
// Options.RenewInterval says. Its Deadline and Context assume that the
// lock was acquired or renewed just now; the lock may in fact expire
// sooner, so call Renew first when the remaining time matters.
//
// Invalid input (a bad name, an empty or oversized secret, a token ≤ 0)
// returns an error wrapping ErrInvalid.
func (c *Client) Attach(name, secret string, token int64) (*Lease, error) {
	return c.attach(name, secret, token, node.Lock)
}

// attach is Attach for a lease of protocol p (a lock's, a permit's).
func (c *Client) attach(name, secret string, token int64, p *node.Protocol) (*Lease, error) {
	if err := c.check(name); err != nil {
		return nil, err
	}
	if secret == "" || len(secret) > MaxSecretLen {
		return nil, fmt.Errorf("%w: secret length %d not in [1, %d]", ErrInvalid, len(secret), MaxSecretLen)
	}
	if token <= 0 {
		return nil, fmt.Errorf("%w: token %d not positive", ErrInvalid, token)
	}
	// As an acquired lease, so that the handle stays in step with them,
	// but without background renewals and without an acquisition time.
	l := &Lease{c: c}
	c.cfg.SetRef(&l.ref, p, name, secret)
	l.start(context.Background(), token, time.Now(), false)
	l.acquired = time.Time{}
	return l, nil
}
