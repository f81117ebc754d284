package fencelock

import (
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A quorum acquisition is valid for the TTL less the drift allowance, not
// the whole TTL: one that took longer than that, even if less than the
// TTL, fails (and releases), since its lease's deadline would already have
// passed.
func TestQuorum_inTimeSubtractsDrift(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	c := NewQuorum([]redis.UniversalClient{s.Client(t), s.Client(t), s.Client(t)}, &Options{TTL: 10 * time.Second})
	q := c.be.(*quorum)
	ctx := t.Context()
	var r lockRef
	c.cfg.setRef(&r, "in-time", "")
	spent := c.cfg.ttl - c.cfg.drift/2 // past the validity, within the TTL
	if _, _, err := q.inTime(ctx, &r, time.Now().Add(-spent), 7); !errors.Is(err, ErrNotAcquired) {
		t.Errorf("inTime after %v of TTL %v (drift %v): error = %v, want ErrNotAcquired", spent, c.cfg.ttl, c.cfg.drift, err)
	}
	if token, _, err := q.inTime(ctx, &r, time.Now().Add(-time.Second), 7); err != nil || token != 7 {
		t.Errorf("inTime after 1s of TTL %v: %d, %v; want 7, nil", c.cfg.ttl, token, err)
	}
}
