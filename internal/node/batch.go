package node

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/fencelock/fencelock/transport"
	"github.com/redis/go-redis/v9"
)

// A batcher sends the acquisitions, releases and resignations of one
// master in natural batches: a call goes out at once, alone, when less
// than maxFlying sends are in flight to that master; calls that arrive
// while they are wait and go together in one pipeline the moment one
// returns. Alone, a call costs what it did before batching (a plain
// Process, on its caller's context); under load, many calls share a round trip and the server's
// per-request work, with no timer and no added wait. A batcher has no
// goroutine while idle: the first batch after a lone call starts one,
// which sends batches for as long as calls keep arriving.
//
// Each call keeps its own commands, so its own replies and errors: the
// batch only sends them. What a reply means (NOSCRIPT, a refused native
// command, an acquisition to undo) is decided by the caller, as alone,
// and a command it sends again goes through the batcher again.
//
// A transport that pipelines concurrent callers itself, on a connection
// whose writes and reads overlap (transport.Conn.Pipelines), gets every
// call at once: a batch of the batcher's own would only hold calls back.
type batcher struct {
	conn   transport.Conn // the node's: routes each key on a Cluster
	master transport.Conn // a Cluster master's, for WAIT; nil outside a Cluster

	mu      sync.Mutex
	flying  int     // lone calls and batches in flight, at most maxFlying
	pending []*call // calls waiting for the next batch
}

// A call is one caller's commands in a batch.
type call struct {
	cmds     []redis.Cmder
	pinned   bool      // has a WAIT: goes on the master's own connection
	deadline time.Time // the caller's; zero for none
	state    int       // callQueued, callSent, callLeft; guarded by batcher.mu
	done     chan struct{}
}

const (
	callQueued = iota // in batcher.pending
	callSent          // in a batch in flight
	callLeft          // its caller left while it was in flight
)

// maxCalls bounds a batch. Past a few dozen calls the round trip is
// shared enough that a larger batch saves little, while every call in it
// waits for the whole pipeline to be written, run and read (128 scripts
// are about a millisecond of server time); the rest wait for the next
// batch, which goes out as soon as this one returns.
const maxCalls = 128

// maxFlying bounds the sends in flight to one master: a second one goes
// at once, so that a release need not wait behind another caller's
// attempt that is in flight (a lock handed over within one Client).
const maxFlying = 2

// leftBatch is the error of a call whose caller's context ended before
// its replies came: err is the context's. If sent, the commands were in
// flight and may yet run.
type leftBatch struct {
	err  error
	sent bool
	done <-chan struct{} // if sent, closed when the batch's replies came
}

func (e *leftBatch) Error() string { return e.err.Error() }
func (e *leftBatch) Unwrap() error { return e.err }

// Process sends cmd, alone or in a batch, and returns its error: runners
// send through it.
func (b *batcher) Process(ctx context.Context, cmd redis.Cmder) error {
	if b.conn.Pipelines() {
		return b.conn.Process(ctx, cmd)
	}
	if b.claim() {
		// Alone: a plain request, on the caller's context, costing no
		// allocation of the batcher's.
		err := b.conn.Process(ctx, cmd)
		b.sent()
		return err
	}
	return b.wait(ctx, &call{cmds: []redis.Cmder{cmd}})
}

// claim reports whether fewer than maxFlying sends were in flight, and
// then counts the caller's: it sends at once, and calls sent() after.
func (b *batcher) claim() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.flying == maxFlying {
		return false
	}
	b.flying++
	return true
}

// sent ends a lone call's send: the calls queued meanwhile go out.
func (b *batcher) sent() {
	b.mu.Lock()
	b.next()
	b.mu.Unlock()
}

// do sends cmds in order, on one connection, and returns the first of
// their errors, or a *leftBatch if ctx ended first (then cmds must not be
// read: a batch in flight may still fill them). pinned cmds go on the
// master's own connection (a WAIT must follow its write there).
func (b *batcher) do(ctx context.Context, pinned bool, cmds ...redis.Cmder) error {
	if b.conn.Pipelines() {
		return b.pipe(ctx, pinned, cmds)
	}
	if b.claim() {
		err := b.pipe(ctx, pinned, cmds)
		b.sent()
		return err
	}
	return b.wait(ctx, &call{cmds: cmds, pinned: pinned})
}

// wait queues c for the next batch and waits for its replies or for ctx
// to end, as do.
func (b *batcher) wait(ctx context.Context, c *call) error {
	c.done = make(chan struct{})
	c.deadline, _ = ctx.Deadline()
	b.mu.Lock()
	if b.flying < maxFlying {
		// A send in flight returned meanwhile: this call goes out
		// alone after all.
		b.flying++
		b.mu.Unlock()
		var err error
		if len(c.cmds) == 1 && !c.pinned {
			err = b.conn.Process(ctx, c.cmds[0])
		} else {
			err = b.pipe(ctx, c.pinned, c.cmds)
		}
		b.sent()
		return err
	}
	b.pending = append(b.pending, c)
	b.mu.Unlock()

	select {
	case <-c.done:
		return firstErr(c.cmds)
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch c.state {
	case callQueued:
		// Not sent: it leaves the queue and nothing of it runs.
		for i, p := range b.pending {
			if p == c {
				b.pending = append(b.pending[:i], b.pending[i+1:]...)
				break
			}
		}
		return &leftBatch{err: context.Cause(ctx)}
	case callSent:
		c.state = callLeft
		return &leftBatch{err: context.Cause(ctx), sent: true, done: c.done}
	}
	return firstErr(c.cmds) // the replies came meanwhile
}

// next, with b.mu held, after a send returned: the pending calls go out
// at once, from a goroutine that sends batches until none is left, so
// the sender's own caller does not wait for them.
func (b *batcher) next() {
	if len(b.pending) == 0 {
		b.flying--
		return
	}
	go b.flush()
}

// flush sends the pending calls in batches of up to maxCalls until none
// is left.
func (b *batcher) flush() {
	var batch []*call
	var cmds []redis.Cmder
	for {
		b.mu.Lock()
		k := min(len(b.pending), maxCalls)
		if k == 0 {
			b.flying--
			b.mu.Unlock()
			return
		}
		batch = append(batch[:0], b.pending[:k]...)
		for _, c := range batch {
			c.state = callSent
		}
		n := copy(b.pending, b.pending[k:])
		clear(b.pending[n:])
		b.pending = b.pending[:n]
		b.mu.Unlock()

		// The batch's context is none of its callers': one that leaves
		// must not fail the others. It ends at the latest of their
		// deadlines, or none if one has none.
		cmds = cmds[:0]
		pinned, deadline, bounded := false, time.Time{}, true
		for _, c := range batch {
			cmds = append(cmds, c.cmds...)
			pinned = pinned || c.pinned
			if c.deadline.IsZero() {
				bounded = false
			} else if c.deadline.After(deadline) {
				deadline = c.deadline
			}
		}
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if bounded {
			ctx, cancel = context.WithDeadline(ctx, deadline)
		}
		b.pipe(ctx, pinned, cmds)
		cancel()

		b.mu.Lock()
		for _, c := range batch {
			close(c.done) // a caller that left waits no more, its cleanup does
		}
		b.mu.Unlock()
		clear(batch)
		clear(cmds)
		// Yield once before taking the next batch: the callers this batch
		// has just woken run first and queue their next commands (the
		// release after an acquisition), which then share the next round
		// trip rather than go out alone. No timer: the wait is those
		// callers' own run.
		runtime.Gosched()
	}
}

// pipe sends cmds in one pipeline and returns the first of their errors.
func (b *batcher) pipe(ctx context.Context, pinned bool, cmds []redis.Cmder) error {
	c := b.conn
	if pinned && b.master != nil {
		// WAIT names no key: a Cluster pipeline would send it to any
		// master.
		c = b.master
	}
	c.Pipeline(ctx, cmds...)
	return firstErr(cmds)
}

func firstErr(cmds []redis.Cmder) error {
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return err
		}
	}
	return nil
}

// batchers are a node's batchers: one for a standalone server or a
// Sentinel's master, one per master of a Cluster.
type batchers struct {
	one *batcher // outside a Cluster

	mu   sync.Mutex
	byID map[string]*batcher // a Cluster's, by master address
}

// batcher returns the batcher of the master that serves key.
func (n *Node) batcher(ctx context.Context, key string) *batcher {
	bs := n.batches
	if !n.conn.Cluster() {
		return bs.one
	}
	addr, m, err := n.master(ctx, key)
	if err != nil {
		// No master known for the key: the call goes alone, through the
		// Cluster client, which reports what it meets.
		return &batcher{conn: n.conn}
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.byID[addr]
	if b == nil {
		if bs.byID == nil {
			bs.byID = map[string]*batcher{}
		}
		b = &batcher{conn: n.conn, master: m}
		bs.byID[addr] = b
	}
	return b
}

// isLeft reports whether err is a *leftBatch.
func isLeft(err error) bool {
	_, ok := err.(*leftBatch)
	return ok
}

// Queued returns how many calls wait for the next batch to the master
// that serves key: tests wait for it to see a batch form.
func (n *Node) Queued(ctx context.Context, key string) int {
	b := n.batcher(ctx, key)
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}
