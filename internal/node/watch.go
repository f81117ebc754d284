package node

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/fencelock/fencelock/transport"
)

// Watching a lease's lock: the server tracks the lock key for a
// connection of the deployment's own (CLIENT TRACKING, transport.Tracker),
// and tells it when a command changed the key: written, deleted, expired
// or evicted. The key is then read again on that connection, which also
// tracks it again: a value other than the lease's owner means the lease
// is lost, at once rather than at its next renewal. The lease's own
// renewals change the key too; the read finds it still the lease's.

// watchTimeout bounds the reads of a watch: a watch that cannot read
// leaves the lease to its renewals.
const watchTimeout = 5 * time.Second

// retrackPause is how long a watch waits before it tracks again on a new
// connection, after its tracking connection was lost, and the first pause
// after an attempt to track that failed; the pauses double up to
// maxArmPause.
const (
	retrackPause = 100 * time.Millisecond
	maxArmPause  = time.Second
)

// A watch is one lease's interest in its lock key.
type watch struct {
	key, owner string
	lost       func()

	// mu is held while lost is called, and by stop: once stop has
	// returned, lost is not called.
	mu      sync.Mutex
	stopped bool          // by stop, or once lost was called
	done    chan struct{} // closed with stopped: arm tries no more
}

// stop reports whether w was not stopped yet, and stops it.
func (w *watch) stop() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	was := w.stopped
	w.end()
	return !was
}

// end, with w.mu held, marks w stopped.
func (w *watch) end() {
	if !w.stopped {
		w.stopped = true
		close(w.done)
	}
}

// watchers are a node's watches, by master.
type watchers struct {
	mu        sync.Mutex
	masters   map[string]*tracking // by master address ("" outside a Cluster)
	untracked bool                 // the transport cannot track: no watch is kept
}

// tracking is one master's tracking connection and the watches on it.
type tracking struct {
	tr      transport.Tracker
	watches map[string][]*watch // by key
}

// Watch watches r's lock on n until stop is called: lost is called once,
// on another goroutine, as soon as the lock is seen gone or held by
// another owner. Watch returns at once; the tracking is set up in the
// background. stop waits for a call of lost in progress; once it has
// returned, lost is not called (lost must not call stop). Where the
// transport cannot track keys, Watch does nothing: the lease's renewals
// find the loss.
func (n *Node) Watch(r *Ref, lost func()) (stop func()) {
	w := &watch{key: r.Lock, owner: r.Owner, lost: lost, done: make(chan struct{})}
	ws := n.watches
	go ws.arm(n, w)
	return func() {
		w.stop()
		ws.mu.Lock()
		defer ws.mu.Unlock()
		for addr, t := range ws.masters {
			if removeWatch(t, w) && len(t.watches) == 0 {
				// Closed before the next watch can make another: a
				// client has room for one (go-redis: one handler of
				// invalidations per client).
				t.tr.Close()
				delete(ws.masters, addr)
			}
		}
	}
}

// removeWatch takes w out of t; it reports whether it was there.
func removeWatch(t *tracking, w *watch) bool {
	list := t.watches[w.key]
	for i, x := range list {
		if x == w {
			if len(list) == 1 {
				delete(t.watches, w.key)
			} else {
				t.watches[w.key] = append(list[:i:i], list[i+1:]...)
			}
			return true
		}
	}
	return false
}

// arm puts w on the tracking connection of its key's master, made if
// need be, and reads its key there, which arms the tracking. What fails
// (no master known, a connection refused, the read: a failover under way)
// is tried again after a pause, until w is stopped; meanwhile the lease's
// renewals find a loss.
func (ws *watchers) arm(n *Node, w *watch) {
	pause := retrackPause
	for !ws.armOnce(n, w) {
		select {
		case <-w.done:
			return
		case <-time.After(pause): // not a synchronisation: a pause before trying again
		}
		pause = min(2*pause, maxArmPause)
	}
}

// armOnce is one attempt of arm: it reports false if it is to be tried
// again, true once w is armed, stopped, or cannot be (the transport cannot
// track, or the server refuses CLIENT TRACKING to this user).
func (ws *watchers) armOnce(n *Node, w *watch) bool {
	ctx, cancel := context.WithTimeout(context.Background(), watchTimeout)
	defer cancel()
	addr, m, err := n.master(ctx, w.key)
	if err != nil {
		n.Follow(ctx, err) // a Cluster's map of masters may be out of date
		return false
	}
	ws.mu.Lock()
	if ws.untracked {
		ws.mu.Unlock()
		return true
	}
	t := ws.masters[addr]
	if t == nil {
		tr, err := m.Track(ctx, func(keys []string) { go ws.changed(n, addr, keys) })
		if errors.Is(err, transport.ErrNoTracking) || nativeRefused(err) {
			ws.untracked = true
			ws.mu.Unlock()
			return true
		}
		if err != nil {
			ws.mu.Unlock()
			n.Follow(ctx, err)
			return false
		}
		t = &tracking{tr: tr, watches: map[string][]*watch{}}
		if ws.masters == nil {
			ws.masters = map[string]*tracking{}
		}
		ws.masters[addr] = t
		go ws.retrack(n, addr, t)
	}
	w.mu.Lock()
	stopped := w.stopped // else stop has run: it would not find w
	if !stopped && !slices.Contains(t.watches[w.key], w) {
		t.watches[w.key] = append(t.watches[w.key], w)
	}
	w.mu.Unlock()
	ws.mu.Unlock()
	if stopped {
		return true
	}
	if err := ws.check(ctx, t, w.key); err != nil {
		n.Follow(ctx, err) // a MOVED: the key's master changed
		return false
	}
	return true
}

// changed reads keys again on master addr's tracking connection (every
// key for nil), after the server said they changed.
func (ws *watchers) changed(n *Node, addr string, keys []string) {
	ctx, cancel := context.WithTimeout(context.Background(), watchTimeout)
	defer cancel()
	ws.mu.Lock()
	t := ws.masters[addr]
	if t != nil && keys == nil {
		for k := range t.watches {
			keys = append(keys, k)
		}
	}
	ws.mu.Unlock()
	if t == nil {
		return
	}
	for _, k := range keys {
		if ws.check(ctx, t, k) != nil {
			// Not read, so not tracked again: its watches arm anew.
			ws.mu.Lock()
			again := slices.Clone(t.watches[k])
			ws.mu.Unlock()
			for _, w := range again {
				go ws.arm(n, w)
			}
		}
	}
}

// check reads key on t's connection, which tracks it (again), and calls
// lost for each watch of key whose owner the value is not. It returns the
// read's error: the key is then not tracked.
func (ws *watchers) check(ctx context.Context, t *tracking, key string) error {
	ws.mu.Lock()
	watched := len(t.watches[key]) > 0
	ws.mu.Unlock()
	if !watched {
		return nil
	}
	v, _, err := t.tr.Read(ctx, key)
	if err != nil {
		return err
	}
	ws.mu.Lock()
	var lost []*watch
	for _, w := range t.watches[key] {
		if w.owner != v {
			lost = append(lost, w)
		}
	}
	ws.mu.Unlock()
	for _, w := range lost {
		w.mu.Lock()
		if !w.stopped {
			w.end()
			w.lost()
		}
		w.mu.Unlock()
	}
	return nil
}

// retrack, when master addr's tracking connection t is lost, tracks its
// watches again on a new one: changes made meanwhile are found by the
// reads that arm the new one.
func (ws *watchers) retrack(n *Node, addr string, t *tracking) {
	<-t.tr.Done()
	ws.mu.Lock()
	if ws.masters[addr] != t { // closed by the last stop
		ws.mu.Unlock()
		return
	}
	delete(ws.masters, addr)
	var again []*watch
	for _, list := range t.watches {
		again = append(again, list...)
	}
	ws.mu.Unlock()
	time.Sleep(retrackPause) // not a synchronisation: a pause before reconnecting
	for _, w := range again {
		go ws.arm(n, w)
	}
}
