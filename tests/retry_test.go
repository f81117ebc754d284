package tests

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// retriedLoss is a go-redis hook that makes go-redis itself retry a
// command that ran: the first command written whose bytes contain marker
// reaches the server, which runs it and answers; the hook drops the
// answer, closes the connection and fails the read with a timeout, which
// go-redis retries on a new connection. Until that call returns (its
// retries spent), new connections go to retryAddr instead: a closed port
// (connection refused) or a replica (READONLY). Then they go to the
// server again, and connections to retryAddr fail their next write, so
// that go-redis drops them.
type retriedLoss struct {
	marker    []byte
	retryAddr string

	mu      sync.Mutex
	state   int      // lossArmed, lossTripped, lossHealed
	sources []string // sources of the scripts sent by EVAL, for SCRIPT LOAD on a replica
}

const (
	lossArmed = iota
	lossTripped
	lossHealed
)

func (h *retriedLoss) get() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state
}

// fired reports whether a reply was dropped and go-redis's retries of its
// command have ended.
func (h *retriedLoss) fired() bool { return h.get() == lossHealed }

func (h *retriedLoss) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		redirected := h.get() == lossTripped
		if redirected {
			addr = h.retryAddr
		}
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &lossConn{Conn: c, h: h, redirected: redirected}, nil
	}
}

func (h *retriedLoss) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.record(cmd)
		err := next(ctx, cmd)
		h.heal(cmd)
		return err
	}
}

func (h *retriedLoss) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.record(cmd)
		}
		err := next(ctx, cmds)
		h.heal(cmds...)
		return err
	}
}

func (h *retriedLoss) record(cmd redis.Cmder) {
	if cmd.Name() == "eval" {
		h.mu.Lock()
		h.sources = append(h.sources, cmd.Args()[1].(string))
		h.mu.Unlock()
	}
}

// heal ends the fault once the call that tripped it returns (a call
// with the marker among its arguments: not the commands go-redis sends
// to set up a new connection, which pass through the hook too).
func (h *retriedLoss) heal(cmds ...redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != lossTripped {
		return
	}
	for _, cmd := range cmds {
		for _, a := range cmd.Args() {
			if s, ok := a.(string); ok && bytes.Contains([]byte(s), h.marker) {
				h.state = lossHealed
				return
			}
		}
	}
}

// loadScripts loads on rdb (a replica) the scripts the client sent so
// far, so that its EVALSHA there fails READONLY at the first write, not
// NOSCRIPT.
func (h *retriedLoss) loadScripts(t *testing.T, rdb *redis.Client) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, src := range h.sources {
		if err := rdb.ScriptLoad(t.Context(), src).Err(); err != nil {
			t.Fatalf("SCRIPT LOAD on the replica: %v", err)
		}
	}
}

// lossConn is a connection of a retriedLoss client.
type lossConn struct {
	net.Conn
	h          *retriedLoss
	redirected bool
	dropNext   bool // the next read is the tripping command's reply
}

func (c *lossConn) Write(b []byte) (int, error) {
	h := c.h
	h.mu.Lock()
	switch {
	case c.redirected && h.state == lossHealed:
		h.mu.Unlock()
		c.Conn.Close()
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: errors.New("retriedLoss: connection to the retry address ended")}
	case h.state == lossArmed && !c.redirected && bytes.Contains(b, h.marker):
		c.dropNext = true
	case h.state == lossTripped && !c.redirected:
		// Another connection to the server, idle in the pool (a batch's
		// callers had several): the retry must not reach the server
		// through it either.
		h.mu.Unlock()
		c.Conn.Close()
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: errors.New("retriedLoss: connection ended while the fault holds")}
	}
	h.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *lossConn) Read(b []byte) (int, error) {
	if !c.dropNext {
		return c.Conn.Read(b)
	}
	n, err := c.Conn.Read(b)
	if err != nil {
		return n, err
	}
	c.dropNext = false
	if b[0] == '-' {
		return n, nil // an error reply (NOSCRIPT): the command did not run
	}
	c.h.mu.Lock()
	c.h.state = lossTripped
	c.h.mu.Unlock()
	c.Conn.Close()
	return 0, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
}

// retryCase is how go-redis's retry of a command that ran fails.
type retryCase struct {
	name string
	// setup returns the address retries go to, and what to do before
	// the fault is armed (given the hook, after a warm-up call).
	setup func(t *testing.T, master *redistest.Server) (addr string, prepare func(h *retriedLoss))
}

var retryCases = []retryCase{
	{"refused", func(t *testing.T, _ *redistest.Server) (string, func(*retriedLoss)) {
		return redistest.RefusedAddr(t), func(*retriedLoss) {}
	}},
	{"READONLY", func(t *testing.T, m *redistest.Server) (string, func(*retriedLoss)) {
		r := redistest.Start(t, &redistest.Options{ReplicaOf: m.Addr()})
		redistest.WaitReplicasInSync(t, m, 1)
		return r.Addr(), func(h *retriedLoss) { h.loadScripts(t, r.Client(t)) }
	}},
}

// retryClient returns a go-redis client of m with the retriedLoss hook
// (not armed until prepare ran). Calls are made one at a time, so its
// pool holds one connection, the one the fault closes: go-redis's retry
// dials a new one. (The pool is larger than the retries' dials: a pool
// whose every dial failed returns the last dial error for a second.)
func retryClient(t *testing.T, m *redistest.Server, h *retriedLoss) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), PoolSize: 10, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	rdb.AddHook(h)
	return rdb
}

// retrySetup starts a master (with a replica for MinReplicas, but for
// READONLY, whose case brings its own) and returns it with the
// retriedLoss hook for requests naming marker, a client of the master
// carrying it, and arm, which prepares the case and arms the fault
// after the caller's warm-up.
func retrySetup(t *testing.T, tc retryCase, minReplicas int, marker string) (*redistest.Server, *retriedLoss, *redis.Client, func()) {
	t.Helper()
	skipOnTransport(t, skipHooked)
	m := fastSyncMaster(t)
	if minReplicas > 0 && tc.name != "READONLY" {
		redistest.Start(t, &redistest.Options{ReplicaOf: m.Addr()})
		redistest.WaitReplicasInSync(t, m, 1)
	}
	addr, prepare := tc.setup(t, m)
	h := &retriedLoss{marker: []byte(marker), retryAddr: addr, state: lossHealed}
	rdb := retryClient(t, m, h)
	return m, h, rdb, func() {
		prepare(h)
		h.mu.Lock()
		h.state = lossArmed
		h.mu.Unlock()
	}
}

// An acquisition whose reply is lost and whose retry by go-redis fails
// (the dial refused, or READONLY from a replica the retry reached) took
// the lock at the first try: the attempt must delete it before returning
// the error, whatever the last error says. With and without MinReplicas.
func TestClient_TryAcquire_lostReplyRetried(t *testing.T) {
	t.Parallel()
	for _, minReplicas := range []int{0, 1} {
		for _, tc := range retryCases {
			t.Run(tc.name+map[int]string{0: "", 1: "/MinReplicas"}[minReplicas], func(t *testing.T) {
				t.Parallel()
				m, h, rdb, arm := retrySetup(t, tc, minReplicas, "{retried}")
				c := newClient(t, rdb, &fencelock.Options{MinReplicas: minReplicas, ReplicaTimeout: 5 * time.Second})
				ctx := t.Context()
				// A warm-up loads the scripts; then the fault is armed.
				l, err := c.TryAcquire(ctx, "warm-up")
				if err != nil {
					t.Fatalf("warm-up TryAcquire error = %v", err)
				}
				l.Release(ctx)
				arm()

				l, err = c.TryAcquire(ctx, "retried")
				if !h.fired() {
					t.Fatalf("the fault did not fire (TryAcquire = %v, %v)", l, err)
				}
				if err == nil || l != nil {
					t.Fatalf("TryAcquire = %v, %v; want an error", l, err)
				}
				if tc.name == "READONLY" && !errorHasPrefix(err, "READONLY") {
					t.Errorf("TryAcquire error = %v, want the retry's READONLY", err)
				}
				admin := m.Client(t)
				if n := admin.Exists(ctx, "fencelock:{retried}").Val(); n != 0 {
					t.Errorf("lock left behind by the attempt whose retry failed (%v): EXISTS = %d, PTTL = %v; want 0",
						err, n, admin.PTTL(ctx, "fencelock:{retried}").Val())
				}
			})
		}
	}
}

// errorHasPrefix reports whether err's text, or any error it wraps,
// starts with prefix.
func errorHasPrefix(err error, prefix string) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return false
}

// A campaign whose reply is lost and whose retry by go-redis fails took
// the election's lock and wrote its leader's record at the first try. The
// attempt must resign it: otherwise Leader names a candidate whose
// attempt failed, for the TTL, and the candidate's next attempts wait
// behind it. With and without MinReplicas.
func TestElection_Campaign_lostReplyRetried(t *testing.T) {
	t.Parallel()
	for _, minReplicas := range []int{0, 1} {
		for _, tc := range retryCases {
			t.Run(tc.name+map[int]string{0: "", 1: "/MinReplicas"}[minReplicas], func(t *testing.T) {
				t.Parallel()
				m, h, rdb, arm := retrySetup(t, tc, minReplicas, "{elected}")
				c := newClient(t, rdb, &fencelock.Options{TTL: time.Minute, RetryInterval: 100 * time.Millisecond,
					MinReplicas: minReplicas, ReplicaTimeout: 5 * time.Second})
				ctx := t.Context()
				warm := c.Election("warm-up")
				if _, err := warm.Campaign(ctx, "w"); err != nil {
					t.Fatalf("warm-up Campaign error = %v", err)
				}
				if err := warm.Resign(ctx); err != nil {
					t.Fatalf("warm-up Resign error = %v", err)
				}
				arm()

				// The failed attempt is retried by Campaign (an Acquire): it
				// must get the lock at once, not a TTL later.
				e := c.Election("elected")
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				l, err := e.Campaign(cctx, "candidate")
				if !h.fired() {
					t.Fatalf("the fault did not fire (Campaign = %v, %v)", l, err)
				}
				got, lerr := newClient(t, m.Client(t), nil).Election("elected").Leader(ctx)
				if err != nil {
					t.Fatalf("Campaign error = %v (Leader() = %+v, %v), want the lock once the failed attempt resigned", err, got, lerr)
				}
				defer e.Resign(ctx)
				if lerr != nil || got.LeaseID != l.ID() || got.Term != l.Token() {
					t.Errorf("Leader() = %+v, %v; want the campaign's lease %s, term %d", got, lerr, l.ID(), l.Token())
				}
			})
		}
	}
}

// On a quorum, an acquisition whose reply is lost on two nodes of three,
// and whose retry by go-redis is refused there, fails (one node is no
// majority) and leaves the lock on no node: what the first tries took is
// released with the attempt's owner value.
func TestQuorum_lostReplyRetried(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	var rdbs []redis.UniversalClient
	var hooks []*retriedLoss
	var servers []*redistest.Server
	for i := range 3 {
		s := redistest.New(t)
		servers = append(servers, s)
		h := &retriedLoss{marker: []byte("{q-retried}"), retryAddr: redistest.RefusedAddr(t), state: lossHealed}
		if i < 2 {
			h.state = lossArmed
			hooks = append(hooks, h)
		}
		rdbs = append(rdbs, retryClient(t, s, h))
	}
	c := newQuorum(t, rdbs, &fencelock.Options{TTL: time.Minute})
	ctx := t.Context()
	l, err := c.TryAcquire(ctx, "q-retried")
	for i, h := range hooks {
		if !h.fired() {
			t.Fatalf("the fault on node %d did not fire (TryAcquire = %v, %v)", i, l, err)
		}
	}
	if !errors.Is(err, fencelock.ErrNoQuorum) || l != nil {
		t.Fatalf("TryAcquire = %v, %v; want ErrNoQuorum", l, err)
	}
	// The cleanup of the nodes that did not answer may end after the
	// call: wait for it, bounded.
	deadline := time.Now().Add(5 * time.Second)
	for i, s := range servers {
		admin := s.Client(t)
		for admin.Exists(ctx, "fencelock:{q-retried}").Val() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("node %d: lock left behind by the failed acquisition: PTTL = %v, want none", i, admin.PTTL(ctx, "fencelock:{q-retried}").Val())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// fastSyncMaster starts a server whose replicas sync at once, not after
// the default 5 s of diskless-sync delay.
func fastSyncMaster(t *testing.T) *redistest.Server {
	return redistest.Start(t, &redistest.Options{Config: []string{"repl-diskless-sync-delay 0"}})
}
