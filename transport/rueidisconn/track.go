package rueidisconn

import (
	"context"
	"errors"
	"sync"

	"github.com/fencelock/fencelock/transport"
	"github.com/redis/rueidis"
)

// Track tracks keys on a dedicated connection, whose invalidations rueidis
// reads as they come (RESP3 push messages). On a Cluster, on one such
// connection per master: rueidis does not say which master serves a key,
// so a read goes where the key was last read, or to any node the first
// time, and follows the MOVED reply to its master.
func (t *conn) Track(ctx context.Context, changed func(keys []string)) (transport.Tracker, error) {
	if t.cluster {
		return &clusterTracker{c: t.c, changed: changed, nodes: map[string]*tracker{}, at: map[string]string{}, done: make(chan struct{})}, nil
	}
	return track(ctx, t.c, changed)
}

// track returns a tracker on a dedicated connection of c, a standalone
// client or one node's.
func track(ctx context.Context, c rueidis.Client, changed func(keys []string)) (*tracker, error) {
	d, cancel := c.Dedicate()
	lost := d.SetOnInvalidations(func(ms []rueidis.RedisMessage) {
		if ms == nil {
			changed(nil)
			return
		}
		keys := make([]string, 0, len(ms))
		for _, m := range ms {
			if k, err := m.ToString(); err == nil {
				keys = append(keys, k)
			}
		}
		changed(keys)
	})
	if err := d.Do(ctx, d.B().ClientTracking().On().Build()).Error(); err != nil {
		d.SetOnInvalidations(nil)
		cancel()
		var rerr *rueidis.RedisError
		if errors.As(err, &rerr) {
			err = replyError(rerr.Error()) // a refusal, as the library reads one
		}
		return nil, err
	}
	tr := &tracker{d: d, cancel: cancel, done: make(chan struct{})}
	go func() {
		for range lost { // an error, then closed: the hooks end
		}
		close(tr.done)
	}()
	return tr, nil
}

type tracker struct {
	d      rueidis.DedicatedClient
	cancel func()
	done   chan struct{}
	once   sync.Once
}

func (t *tracker) Read(ctx context.Context, key string) (string, bool, error) {
	v, err := t.d.Do(ctx, t.d.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false, nil
	}
	return v, err == nil, err
}

func (t *tracker) Done() <-chan struct{} { return t.done }

func (t *tracker) Close() {
	// Back to the pool: rueidis ends the hooks (done closes), cleans the
	// connection and, while the hooks are still set, turns its tracking
	// off. Clearing them first would leave a pooled connection tracking.
	t.once.Do(t.cancel)
	<-t.done
}

// A clusterTracker tracks each key on its master's tracker. It is done as
// soon as one of them is: the library then tracks every key again, on
// new connections, and the reads that arm them find what changed.
type clusterTracker struct {
	c       rueidis.Client
	changed func(keys []string)

	mu     sync.Mutex
	nodes  map[string]*tracker // by node address
	at     map[string]string   // the address that served each key read
	closed bool
	done   chan struct{}
}

// maxKeyAddrs bounds clusterTracker.at: past it the map starts again, and
// a key read then may take a MOVED more.
const maxKeyAddrs = 4096

var (
	// errRedirected is Read's error when a key is still redirected after
	// its master's MOVED was followed (a slot in migration, ASK; a
	// resharding meanwhile): the library's renewals decide.
	errRedirected  = errors.New("rueidisconn: tracking read redirected again")
	errClosed      = errors.New("rueidisconn: tracker closed")
	errUnknownNode = errors.New("rueidisconn: no connection to the node a MOVED reply names")
)

func (t *clusterTracker) Read(ctx context.Context, key string) (string, bool, error) {
	t.mu.Lock()
	addr := t.at[key]
	t.mu.Unlock()
	for range 3 { // where it was, the MOVED master, once more after a resharding
		n, at, err := t.node(ctx, addr)
		if err != nil {
			return "", false, err
		}
		v, ok, err := n.Read(ctx, key)
		if rerr, isRedis := rueidis.IsRedisErr(err); isRedis {
			if moved, yes := rerr.IsMoved(); yes {
				addr = moved
				continue
			}
		}
		if err == nil {
			t.mu.Lock()
			if len(t.at) >= maxKeyAddrs {
				clear(t.at)
			}
			t.at[key] = at
			t.mu.Unlock()
		}
		return v, ok, err
	}
	return "", false, errRedirected
}

// node returns the tracker of the node at addr, made if need be; for ""
// one already made, or else one of the first node that takes one (a node
// just failed may still be listed). t.mu is held while a tracker is made:
// its request is bounded by ctx, the watch's.
func (t *clusterTracker) node(ctx context.Context, addr string) (*tracker, string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, "", errClosed
	}
	if addr != "" {
		if n := t.nodes[addr]; n != nil {
			return n, addr, nil
		}
		c := t.c.Nodes()[addr]
		if c == nil {
			return nil, "", errUnknownNode
		}
		n, err := track(ctx, c, t.changed)
		if err != nil {
			return nil, "", err
		}
		t.add(addr, n)
		return n, addr, nil
	}
	for a, n := range t.nodes {
		return n, a, nil
	}
	err := errUnknownNode
	for a, c := range t.c.Nodes() {
		var n *tracker
		if n, err = track(ctx, c, t.changed); err == nil {
			t.add(a, n)
			return n, a, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, "", err
}

// add keeps n as the tracker of addr, with t.mu held: its loss closes t,
// and the library tracks every key again.
func (t *clusterTracker) add(addr string, n *tracker) {
	t.nodes[addr] = n
	go func() {
		<-n.Done()
		t.Close()
	}()
}

func (t *clusterTracker) Done() <-chan struct{} { return t.done }

func (t *clusterTracker) Close() {
	t.mu.Lock()
	first := !t.closed
	t.closed = true
	nodes := t.nodes
	t.nodes = nil
	t.mu.Unlock()
	if first {
		for _, n := range nodes {
			n.Close()
		}
		close(t.done)
	}
	<-t.done
}
