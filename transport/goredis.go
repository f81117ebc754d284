package transport

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/push"
)

// GoRedis returns the Conn of a go-redis client: a *redis.Client, a
// Sentinel failover client or a *redis.ClusterClient (or a type that
// wraps one and keeps its MasterForKey and ReloadState methods).
func GoRedis(rdb redis.UniversalClient) Conn {
	c := &goRedis{rdb: rdb}
	c.cluster, _ = rdb.(clusterClient)
	return c
}

type goRedis struct {
	rdb     redis.UniversalClient
	cluster clusterClient // rdb, if it routes keys to a Cluster's masters
	masters sync.Map      // a Cluster's: *redis.Client of a master -> its *goRedis
}

// clusterClient is what a Cluster client has beyond UniversalClient: it
// routes a key to the master serving its slot, and reloads its slot map
// on request. *redis.ClusterClient has both; a client that wraps one must
// keep them, or WAIT goes to any master, wake-ups are not sharded and a
// failover is followed only at go-redis's periodic reload.
type clusterClient interface {
	MasterForKey(ctx context.Context, key string) (*redis.Client, error)
	ReloadState(ctx context.Context)
}

func (c *goRedis) Process(ctx context.Context, cmd redis.Cmder) error {
	return c.rdb.Process(ctx, cmd)
}

func (c *goRedis) Pipeline(ctx context.Context, cmds ...redis.Cmder) error {
	p := c.rdb.Pipeline()
	for _, cmd := range cmds {
		p.Process(ctx, cmd)
	}
	p.Exec(ctx)
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return err
		}
	}
	return nil
}

func (c *goRedis) Master(ctx context.Context, key string) (string, Conn, error) {
	if c.cluster == nil {
		return "", c, nil
	}
	m, err := c.cluster.MasterForKey(ctx, key)
	if err != nil {
		return "", nil, err
	}
	mc, ok := c.masters.Load(m)
	if !ok {
		mc, _ = c.masters.LoadOrStore(m, &goRedis{rdb: m})
	}
	return m.Options().Addr, mc.(*goRedis), nil
}

func (c *goRedis) Cluster() bool { return c.cluster != nil }

func (c *goRedis) Reload(ctx context.Context) {
	if c.cluster != nil {
		c.cluster.ReloadState(ctx)
	}
}

func (c *goRedis) Connected() bool { return c.rdb.PoolStats().TotalConns > 0 }

func (c *goRedis) Pipelines() bool { return false }

func (c *goRedis) Subscribe(ctx context.Context, sharded bool, channels ...string) Subscription {
	s := &goRedisSub{events: make(chan Event, 1)}
	if sharded {
		s.ps = c.rdb.SSubscribe(ctx, channels...)
	} else {
		s.ps = c.rdb.Subscribe(ctx, channels...)
	}
	go s.read(s.ps.ChannelWithSubscriptions())
	return s
}

type goRedisSub struct {
	ps     *redis.PubSub
	events chan Event
}

func (s *goRedisSub) Subscribe(ctx context.Context, channels ...string) error {
	return s.ps.Subscribe(ctx, channels...)
}

func (s *goRedisSub) Unsubscribe(ctx context.Context, channels ...string) error {
	return s.ps.Unsubscribe(ctx, channels...)
}

func (s *goRedisSub) Events() <-chan Event { return s.events }

func (s *goRedisSub) Close() error { return s.ps.Close() }

// read turns go-redis's messages into Events until the subscription is
// closed.
func (s *goRedisSub) read(msgs <-chan any) {
	defer close(s.events)
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
				s.events <- Event{Channel: m.Channel, Subscribed: true}
			}
		case *redis.Message:
			s.events <- Event{Channel: m.Channel}
		}
	}
}

// pollTracking is how often a go-redis Tracker sends PING: go-redis reads
// a connection's push messages (the invalidations) only when it reads a
// reply there, so a change is reported within this much.
const pollTracking = 5 * time.Millisecond

// Track needs a *redis.Client on RESP3 (go-redis's default): the
// invalidations come as push messages on the Tracker's own connection.
// go-redis keeps one handler of them per client, which a Tracker holds
// while it lives: a client with another (its own client-side cache) is
// not tracked.
func (c *goRedis) Track(ctx context.Context, changed func(keys []string)) (Tracker, error) {
	rc, ok := c.rdb.(*redis.Client)
	if !ok || rc.Options().Protocol == 2 || rc.Options().PushNotificationProcessor == nil {
		return nil, ErrNoTracking
	}
	handlers := rc.Options().PushNotificationProcessor
	if err := handlers.RegisterHandler("invalidate", invalidations(changed), false); err != nil {
		return nil, ErrNoTracking
	}
	t := &goRedisTracker{conn: rc.Conn(), handlers: handlers, done: make(chan struct{}), stop: make(chan struct{})}
	if err := t.conn.Process(ctx, redis.NewStatusCmd(ctx, "client", "tracking", "on")); err != nil {
		t.conn.Close()
		handlers.UnregisterHandler("invalidate")
		return nil, err
	}
	go t.poll()
	return t, nil
}

type goRedisTracker struct {
	mu       sync.Mutex // one command at a time on conn, and closed
	closed   bool       // conn is closed: Read fails
	conn     *redis.Conn
	handlers push.NotificationProcessor // the client's, which holds the handler
	done     chan struct{}              // closed when poll has ended
	stop     chan struct{}              // closed by Close
	once     sync.Once
}

// poll sends PING on the connection every pollTracking, so that the
// invalidations that came meanwhile are read, until Close or an error.
func (t *goRedisTracker) poll() {
	defer func() {
		// Back to the pool without tracking, and the handler free for
		// the next Tracker; under mu, as a Read in flight (from an
		// invalidation's handler) still uses conn.
		t.mu.Lock()
		t.closed = true
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		t.conn.Process(ctx, redis.NewStatusCmd(ctx, "client", "tracking", "off"))
		cancel()
		t.conn.Close()
		t.mu.Unlock()
		t.handlers.UnregisterHandler("invalidate")
		close(t.done)
	}()
	tick := time.NewTicker(pollTracking)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		t.mu.Lock()
		err := t.conn.Ping(ctx).Err()
		t.mu.Unlock()
		cancel()
		if err != nil {
			return
		}
	}
}

func (t *goRedisTracker) Read(ctx context.Context, key string) (string, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return "", false, errTrackerDone
	}
	v, err := t.conn.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	return v, err == nil, err
}

func (t *goRedisTracker) Done() <-chan struct{} { return t.done }

func (t *goRedisTracker) Close() {
	t.once.Do(func() { close(t.stop) })
	<-t.done
}

var errTrackerDone = errors.New("transport: tracking connection closed")

// invalidations is the push handler of "invalidate" messages: the keys
// changed, or nil for every key.
type invalidations func(keys []string)

func (f invalidations) HandlePushNotification(_ context.Context, _ push.NotificationHandlerContext, n []any) error {
	if len(n) < 2 {
		f(nil)
		return nil
	}
	ks, _ := n[1].([]any)
	if ks == nil {
		f(nil)
		return nil
	}
	keys := make([]string, 0, len(ks))
	for _, k := range ks {
		if s, ok := k.(string); ok {
			keys = append(keys, s)
		}
	}
	f(keys)
	return nil
}
