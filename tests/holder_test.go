package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// assertHolder checks that Holder names l: its lease ID and token, with
// a TTL that is positive and at most ttl, and nothing of its secret.
func assertHolder(t *testing.T, c *fencelock.Client, l *fencelock.Lease, ttl time.Duration) fencelock.Holder {
	t.Helper()
	h, err := c.Holder(t.Context(), l.Name())
	if err != nil {
		t.Fatalf("Holder(%q) error = %v, want nil", l.Name(), err)
	}
	if h.LeaseID != l.ID() || h.Token != l.Token() {
		t.Errorf("Holder(%q) = lease %s, token %d; want %s, %d", l.Name(), h.LeaseID, h.Token, l.ID(), l.Token())
	}
	if h.TTL <= 0 || h.TTL > ttl {
		t.Errorf("Holder(%q).TTL = %v, want in (0, %v]", l.Name(), h.TTL, ttl)
	}
	if s := fmt.Sprintf("%+v %#v", h, h); strings.Contains(s, l.Secret()) {
		t.Errorf("Holder %s carries the owner secret", s)
	}
	return h
}

// assertNotHeld checks that Holder reports the lock name free.
func assertNotHeld(t *testing.T, c *fencelock.Client, name string) {
	t.Helper()
	if h, err := c.Holder(t.Context(), name); !errors.Is(err, fencelock.ErrNotHeld) {
		t.Errorf("Holder(%q) = %+v, %v; want an error wrapping ErrNotHeld", name, h, err)
	}
}

// Holder names the lease that holds a lock, with its token and remaining
// TTL, and reports a free lock (never held, released, or expired) as
// ErrNotHeld. Its token is that of the lease, through reacquisitions.
func TestHolder(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	ttl := 2 * time.Second
	c := newClient(t, rdb, &fencelock.Options{TTL: ttl})
	assertNotHeld(t, c, "held")
	for range 2 {
		l := mustAcquire(t, c, "held")
		assertHolder(t, c, l, ttl)
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		assertNotHeld(t, c, "held")
	}

	short := newClient(t, rdb, &fencelock.Options{TTL: 100 * time.Millisecond, RenewInterval: -1})
	l := mustAcquire(t, short, "expiring")
	redistest.WaitFor(t, 5*time.Second, "the lock to expire", func() bool {
		return rdb.Exists(t.Context(), "fencelock:{expiring}").Val() == 0
	})
	assertNotHeld(t, c, "expiring")
	l.Release(t.Context())
}

// An election's leader holds the election's lock: Holder names its lease
// and term.
func TestHolder_election(t *testing.T) {
	t.Parallel()
	c := newClient(t, redistest.New(t).Client(t), nil)
	e := c.Election("elected")
	l, err := e.Campaign(t.Context(), "candidate-1")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Resign(t.Context())
	assertHolder(t, c, l, 10*time.Second)
}

// Keys that fencelock did not write as it does: a lock without a TTL is
// held with a negative TTL; a token counter that is gone is token 0; a
// lock key or counter of another type is an error, not a lock state.
func TestHolder_foreignKeys(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	c := newClient(t, rdb, nil)

	if err := rdb.Set(ctx, "fencelock:{forever}", "value-of-no-lease", 0).Err(); err != nil {
		t.Fatal(err)
	}
	h, err := c.Holder(ctx, "forever")
	if err != nil {
		t.Fatalf("Holder error = %v", err)
	}
	a, _ := c.Attach("forever", "value-of-no-lease", 1)
	if h.TTL >= 0 || h.Token != 0 || h.LeaseID != a.ID() {
		t.Errorf("Holder of a lock key without TTL or counter = %+v; want negative TTL, token 0, lease %s", h, a.ID())
	}

	l := mustAcquire(t, c, "uncounted")
	defer l.Release(ctx)
	rdb.Del(ctx, "fencelock:{uncounted}:token")
	if h, err := c.Holder(ctx, "uncounted"); err != nil || h.Token != 0 || h.LeaseID != l.ID() {
		t.Errorf("Holder with the counter gone = %+v, %v; want lease %s, token 0", h, err, l.ID())
	}

	for key, name := range map[string]string{"fencelock:{hashed}": "hashed", "fencelock:{counted}:token": "counted"} {
		if key == "fencelock:{counted}:token" {
			if err := rdb.Set(ctx, "fencelock:{counted}", "value", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		rdb.HSet(ctx, key, "f", "v")
		var rerr redis.Error
		if _, err := c.Holder(ctx, name); err == nil || errors.Is(err, fencelock.ErrNotHeld) || !errors.As(err, &rerr) || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("Holder with %s a hash: error = %v, want the server's WRONGTYPE", key, err)
		}
	}
	if err := rdb.Set(ctx, "fencelock:{garbled}", "value", 0).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.Set(ctx, "fencelock:{garbled}:token", "twelve", 0)
	if _, err := c.Holder(ctx, "garbled"); err == nil || errors.Is(err, fencelock.ErrNotHeld) || !strings.Contains(err.Error(), "twelve") {
		t.Errorf("Holder with a counter that is not a number: error = %v, want one naming its value", err)
	}
}

// Invalid names are refused before anything is sent: here to a port where
// nothing listens, whose dial error would show otherwise.
func TestHolder_invalidName(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: redistest.RefusedAddr(t), MaxRetries: -1})
	defer rdb.Close()
	c := newClient(t, rdb, nil)
	for _, name := range []string{"", strings.Repeat("x", fencelock.MaxNameLen+1), "a{b", "new\nline"} {
		if _, err := c.Holder(t.Context(), name); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("Holder(%q) error = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := c.Holder(t.Context(), "valid"); err == nil || errors.Is(err, fencelock.ErrNotHeld) {
		t.Errorf("Holder on a closed port: error = %v, want the dial error", err)
	}
}

func TestHolder_sentinel(t *testing.T) {
	t.Parallel()
	g := redistest.NewSentinelGroup(t)
	c := newClient(t, sentinelClient(t, g, nil), nil)
	l := mustAcquire(t, c, "through-sentinel")
	assertHolder(t, c, l, 10*time.Second)
	l.Release(t.Context())
	assertNotHeld(t, c, "through-sentinel")
}

// On a Cluster, each lock is read on the master of its slot.
func TestHolder_cluster(t *testing.T) {
	t.Parallel()
	cl := redistest.NewCluster(t)
	c := newClient(t, cl.Client(t, nil), nil)
	seen := map[int]bool{}
	for i := 0; len(seen) < 3; i++ {
		name := fmt.Sprintf("slot-%d", i)
		master := redistest.Slot("fencelock:{"+name+"}") * 3 / 16384
		if seen[master] {
			continue
		}
		seen[master] = true
		l := mustAcquire(t, c, name)
		assertHolder(t, c, l, 10*time.Second)
		l.Release(t.Context())
		assertNotHeld(t, c, name)
	}
}

// On a quorum, a lease holds the lock if a majority of nodes say so, with
// the majority's TTL; a lease on a minority does not; a majority of
// nodes down leaves it undecided: ErrNoQuorum, not ErrNotHeld.
func TestHolder_quorum(t *testing.T) {
	t.Parallel()
	servers, nodes := quorumNodes(t, 5)
	ctx := t.Context()
	c := newQuorum(t, nodes, &fencelock.Options{TTL: time.Minute, RenewInterval: -1})
	assertNotHeld(t, c, "q")
	l := mustAcquire(t, c, "q")
	defer l.Release(ctx)
	assertHolder(t, c, l, time.Minute)

	// TTLs of 50, 40, 30, 20 and 10s: a majority (3) holds it for 30s.
	for i, n := range nodes {
		if err := n.PExpire(ctx, "fencelock:{q}", time.Duration(50-10*i)*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	h := assertHolder(t, c, l, 30*time.Second)
	if h.TTL <= 20*time.Second {
		t.Errorf("Holder.TTL = %v, want the third longest of the nodes', about 30s", h.TTL)
	}
	// Counters that went past the token on a minority (a node whose
	// acquire request arrived after the write-back issues one of its
	// own), or that the write-back missed: the majority's is the token.
	for i, d := range []int64{100, 200, -1, 0, 0} {
		if err := nodes[i].Set(ctx, "fencelock:{q}:token", l.Token()+d, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	assertHolder(t, c, l, 30*time.Second)
	for _, n := range nodes {
		n.Set(ctx, "fencelock:{q}:token", l.Token(), 0)
	}

	// A lock on two of five nodes (left over, say) holds nothing.
	for _, n := range nodes[2:4] {
		if err := n.Set(ctx, "fencelock:{minority}", "left-over", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	assertNotHeld(t, c, "minority")

	// Two nodes down: the three others still decide.
	servers[0].Kill(t)
	servers[1].Pause(t)
	t.Cleanup(func() { servers[1].Resume(t) })
	assertHolder(t, c, l, 30*time.Second)

	servers[2].Kill(t)
	if _, err := c.Holder(ctx, "q"); !errors.Is(err, fencelock.ErrNoQuorum) || errors.Is(err, fencelock.ErrNotHeld) {
		t.Errorf("Holder with 3 of 5 nodes down: error = %v, want ErrNoQuorum", err)
	}
}

// A Holder whose majority of nodes does not answer ends with its
// context, well before the quarter TTL it waits for answers on a quorum,
// and says why: the context's error, with ErrNoQuorum on a quorum.
func TestHolder_contextEnds(t *testing.T) {
	t.Parallel()
	servers, nodes := quorumNodes(t, 3)
	opts := &fencelock.Options{TTL: time.Minute, RenewInterval: -1}
	q := newQuorum(t, nodes, opts)
	mustAcquire(t, q, "ends")
	for _, s := range servers[1:] {
		s.Pause(t)
		t.Cleanup(func() { s.Resume(t) })
	}
	for _, tc := range []struct {
		name string
		c    *fencelock.Client
		want error
	}{
		{"quorum", q, fencelock.ErrNoQuorum},
		{"node", newClient(t, nodes[1], opts), context.DeadlineExceeded},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		start := time.Now()
		_, err := tc.c.Holder(ctx, "ends")
		cancel()
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s: Holder took %v after its context ended, want well under the TTL's quarter (15s)", tc.name, took)
		}
		if !errors.Is(err, tc.want) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: Holder with its nodes paused: error = %v, want %v and context.DeadlineExceeded", tc.name, err, tc.want)
		}
	}
}
