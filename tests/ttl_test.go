package tests

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// pttl returns the lock's remaining TTL on rdb, with the default prefix.
func pttl(t *testing.T, rdb redis.UniversalClient, name string) time.Duration {
	t.Helper()
	d, err := rdb.PTTL(t.Context(), "fencelock:{"+name+"}").Result()
	if err != nil {
		t.Fatalf("PTTL %q: %v", name, err)
	}
	return d
}

// A Client from WithTTL takes leases with its TTL and renews them every
// TTL/3 where the Options left RenewInterval to its default; the
// original Client keeps its own.
func TestClient_WithTTL(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	const ttl = 900 * time.Millisecond
	renewed := make(chan fencelock.RenewDoneInfo, 100)
	base := newClient(t, rdb, &fencelock.Options{TTL: time.Minute, Hooks: &fencelock.Hooks{
		RenewDone: func(_ context.Context, i fencelock.RenewDoneInfo) { renewed <- i },
	}})
	short := base.WithTTL(ttl)

	long, err := base.TryAcquire(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	defer long.Release(context.Background())
	start := time.Now()
	l, err := short.TryAcquire(ctx, "short")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	if got := pttl(t, rdb, "short"); got <= ttl/2 || got > ttl {
		t.Errorf("PTTL after WithTTL(%v).TryAcquire = %v, want in (%v, %v]", ttl, got, ttl/2, ttl)
	}
	if got := pttl(t, rdb, "long"); got <= 50*time.Second {
		t.Errorf("PTTL of the original Client's lease = %v, want about its TTL, 1m", got)
	}
	if got := l.Deadline().Sub(start); got > ttl {
		t.Errorf("Deadline - acquisition = %v, want at most the TTL %v", got, ttl)
	}

	// Renewed every ttl/3 = 300ms: three renewals well within 3s, where
	// the original's interval, 20s, would allow none.
	bound := time.After(3 * time.Second)
	for n := 0; n < 3; {
		select {
		case i := <-renewed:
			if i.Name != "short" || i.Err != nil {
				t.Fatalf("renewal %+v, want one of lock %q without error", i, "short")
			}
			n++
		case <-bound:
			t.Fatalf("%d renewals of a %v lease in 3s, want 3 (every TTL/3)", n, ttl)
		}
	}
	if got := time.Since(start); got < 2*ttl/3 {
		t.Errorf("3 renewals after %v, want no sooner than 2 intervals of %v", got, ttl/3)
	}
	if got := pttl(t, rdb, "short"); got <= 0 || got > ttl {
		t.Errorf("PTTL after renewals = %v, want in (0, %v]: renewed with the view's TTL", got, ttl)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// The Options a Client was made with carry over to WithTTL as given:
// defaults follow the new TTL, settings stay and must suit it. A TTL New
// would refuse, or a setting the new TTL breaks, is reported by every
// call, wrapping ErrInvalid, and nothing is sent.
func TestClient_WithTTLInvalid(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	rec := &recorder{}
	rdb.AddHook(rec)
	ctx := t.Context()
	for _, tc := range []struct {
		opts *fencelock.Options
		ttl  time.Duration
	}{
		{nil, -time.Second},
		{nil, time.Millisecond},
		{nil, 25 * time.Hour},
		{&fencelock.Options{RenewInterval: 5 * time.Second}, 3 * time.Second},
		{&fencelock.Options{ReplicaTimeout: 2 * time.Second}, time.Second},
		{&fencelock.Options{TokenRetention: time.Minute}, 2 * time.Minute},
		{&fencelock.Options{TTL: time.Millisecond}, time.Second}, // the original is invalid
	} {
		c := newClient(t, rdb, tc.opts).WithTTL(tc.ttl)
		if _, err := c.TryAcquire(ctx, "x"); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("New(%+v).WithTTL(%v).TryAcquire error = %v, want ErrInvalid", tc.opts, tc.ttl, err)
		}
		if _, err := c.Election("x").Campaign(ctx, "v"); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("New(%+v).WithTTL(%v).Election.Campaign error = %v, want ErrInvalid", tc.opts, tc.ttl, err)
		}
	}
	if n, names := rec.reset(); n != 0 {
		t.Errorf("invalid Clients sent %d commands %v, want none", n, names)
	}
	// 0 selects the default TTL, as in Options: one rule.
	l0, err := newClient(t, rdb, &fencelock.Options{TTL: time.Second}).WithTTL(0).TryAcquire(ctx, "default")
	if err != nil {
		t.Fatalf("WithTTL(0).TryAcquire: %v, want the default TTL", err)
	}
	if got := rdb.PTTL(ctx, "fencelock:{default}").Val(); got <= 5*time.Second || got > 10*time.Second {
		t.Errorf("PTTL after WithTTL(0).TryAcquire = %v, want the default 10s", got)
	}
	l0.Release(ctx)
	rec.reset()
	// Valid: the explicit RenewInterval stays, and suits the longer TTL.
	l, err := newClient(t, rdb, &fencelock.Options{TTL: time.Second, RenewInterval: 200 * time.Millisecond}).WithTTL(time.Hour).TryAcquire(ctx, "ok")
	if err != nil {
		t.Fatalf("WithTTL(1h) with RenewInterval 200ms: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// An election on a WithTTL Client campaigns with its TTL, on one server
// and on a quorum, each node of which gets the lease with that TTL.
func TestClient_WithTTLElectionQuorum(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const ttl = 2 * time.Second
	rdb := redistest.New(t).Client(t)
	_, nodes := quorumNodes(t, 3)
	for _, tc := range []struct {
		name  string
		c     *fencelock.Client
		nodes []redis.UniversalClient
	}{
		{"node", newClient(t, rdb, nil), []redis.UniversalClient{rdb}},
		{"quorum", newQuorum(t, nodes, nil), nodes},
	} {
		c := tc.c.WithTTL(ttl)
		l, err := c.TryAcquire(ctx, tc.name+"-lock")
		if err != nil {
			t.Fatalf("%s: TryAcquire: %v", tc.name, err)
		}
		lead, err := c.Election(tc.name+"-election").Campaign(ctx, "me")
		if err != nil {
			t.Fatalf("%s: Campaign: %v", tc.name, err)
		}
		// A quorum's call returns once a majority took it: the last node's
		// request may still be on its way, and its key then absent.
		for _, name := range []string{tc.name + "-lock", tc.name + "-election"} {
			held := 0
			for i, n := range tc.nodes {
				got := pttl(t, n, name)
				if got == -2*time.Nanosecond {
					continue // absent: not yet written
				}
				held++
				if got <= ttl/2 || got > ttl {
					t.Errorf("%s node %d: PTTL of %q = %v, want in (%v, %v]", tc.name, i, name, got, ttl/2, ttl)
				}
			}
			if want := len(tc.nodes)/2 + 1; held < want {
				t.Errorf("%s: %q held on %d of %d nodes, want at least %d", tc.name, name, held, len(tc.nodes), want)
			}
		}
		if err := errors.Join(l.Release(ctx), lead.Release(ctx)); err != nil {
			t.Errorf("%s: Release: %v", tc.name, err)
		}
	}
}
