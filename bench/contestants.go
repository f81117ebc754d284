package main

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/bsm/redislock"
	"github.com/fencelock/fencelock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis/rueidislock"
)

// A locker is one contestant's lock, bound to its Redis client(s).
//
// acquire waits in the library's own way (its default or tuned retry
// policy) until it holds the lock named name, ctx is done, or the library
// gives up (redsync after its tries, redislock when its retry strategy
// says so); then it returns errGaveUp or the error. The harness calls it
// again after errGaveUp until the scenario's time is over.
type locker interface {
	acquire(ctx context.Context, name string) (held, error)
}

// held is one acquisition.
type held interface {
	release(ctx context.Context) error
	renew(ctx context.Context) error
}

// errGaveUp: the library stopped waiting for a lock someone else holds.
var errGaveUp = errors.New("gave up waiting")

// A contestant is a row in the tables: a library with given settings.
type contestant struct {
	name     string // row label
	settings string // what the settings are, for the README
	// nodes is how many Redis servers it needs (1, or 3 for Redlock).
	nodes int
	// contended: used only in the contended scenario, where retry
	// settings matter; uncontended scenarios use the default rows.
	contendedOnly bool
	// floor marks the baseline the other rows are divided by.
	floor bool
	// baseline marks the harness's own row, a lock that does nothing:
	// its allocations per pair are subtracted from the others'.
	baseline bool
	// transport marks a row that is no lock library but floor+token on
	// another transport (transport.go): pair tables only.
	transport bool
	// limit marks a row that is the server's own limit for a pair of
	// scripts (limit.go): the parallel table only, run by runLimit.
	limit *serverLimit
	new   func(rdbs []*redis.Client) locker
}

// ttl is the lock TTL of every contestant that takes one as an argument;
// fencelock and redsync use their defaults (10s and 8s). Every lock is
// released long before it, so the TTL plays no part in the figures.
const ttl = 10 * time.Second

func contestants() []contestant {
	return []contestant{
		{
			name:     "harness (no lock)",
			settings: "a lock that sends nothing: what the harness itself costs per pair (pair scenarios only)",
			nodes:    1, baseline: true,
			new: func([]*redis.Client) locker { return nullLocker{} },
		},
		{
			name:     "server limit: floor+token",
			settings: "LIMIT, not a lock (bench/limit.go): floor+token's acquire and release scripts as pipelined EVALSHA requests, 16 pairs per pipeline on 4 connections, from a client that only encodes and counts (parallel scenario only)",
			nodes:    1, limit: limitFloorToken,
			new: func(r []*redis.Client) locker { return limitLocker{} },
		},
		{
			name:     "server limit: fencelock",
			settings: "LIMIT, not a lock (bench/limit.go): fencelock's acquire.lua and release.lua the same way, with a default Client's arguments",
			nodes:    1, limit: limitFencelock,
			new: func(r []*redis.Client) locker { return limitLocker{} },
		},
		{
			name:     "floor",
			settings: "SET NX PX, then a Lua compare-and-delete (EVALSHA); waits by polling every 1ms",
			nodes:    1, floor: true,
			new: func(r []*redis.Client) locker { return &floorLocker{rdb: r[0], poll: time.Millisecond} },
		},
		{
			name:     "floor+token",
			settings: "one Lua script: SET NX PX + INCR of a token key; Lua compare-and-delete; polls every 1ms",
			nodes:    1,
			new: func(r []*redis.Client) locker {
				return &floorLocker{rdb: r[0], poll: time.Millisecond, token: true}
			},
		},
		{
			name:     "floor+token/autopipeline",
			settings: "TRANSPORT, not a lock library (bench/transport.go): floor+token's scripts through go-redis's AutoPipeliner, defaults (one batch in flight)",
			nodes:    1, transport: true,
			new: func(r []*redis.Client) locker { return newAutoPipeline(r[0]) },
		},
		{
			name:     "floor+token/rueidis",
			settings: "TRANSPORT, not a lock library (bench/transport.go): floor+token's scripts through rueidis, defaults (auto-pipelining: writes and reads of one connection overlap)",
			nodes:    1, transport: true,
			new: func(r []*redis.Client) locker { return newRueidis(r[0]) },
		},
		{
			name:     "fencelock scripts",
			settings: "SCRIPTS, not the library (bench/transport.go): lua/acquire.lua and lua/release.lua as a default Client sends them, one request per call on the go-redis client; no lease, keeper, batching or wake-up",
			nodes:    1, transport: true,
			new: func(r []*redis.Client) locker { return newLibGoRedis(r[0]) },
		},
		{
			name:     "fencelock scripts/rueidis",
			settings: "SCRIPTS, not the library (bench/transport.go): the same, through rueidis (auto-pipelining)",
			nodes:    1, transport: true,
			new: func(r []*redis.Client) locker { return newLibRueidis(r[0]) },
		},
		{
			name:     "fencelock",
			settings: "defaults: TTL 10s, background renewal every TTL/3, pub/sub wake-up, 500ms fallback retry",
			nodes:    1,
			new:      func(r []*redis.Client) locker { return &fenceLocker{c: fencelock.New(r[0], nil)} },
		},
		{
			name:     "fencelock/rueidis",
			settings: "the library, defaults, over transport/rueidisconn (bench/library.go): a rueidis client of its own, defaults (auto-pipelining); concurrent calls batched into one DoMulti by the Client",
			nodes:    1,
			new:      func(r []*redis.Client) locker { return newFencelockRueidis(r[0]) },
		},
		{
			name:     "fencelock/valkey-go",
			settings: "the same over transport/valkeyconn: a valkey-go client of its own, defaults",
			nodes:    1,
			new:      func(r []*redis.Client) locker { return newFencelockValkey(r[0]) },
		},
		{
			name:     "fencelock/no-keeper",
			settings: "RenewInterval -1: no background renewal goroutine (the holder renews itself)",
			nodes:    1,
			new: func(r []*redis.Client) locker {
				return &fenceLocker{c: fencelock.New(r[0], &fencelock.Options{RenewInterval: -1})}
			},
		},
		{
			name:     "fencelock/fifo-prototype",
			settings: "PROTOTYPE (bench/fifo.go), not the library: per-Client FIFO of waiters, a release wakes only the head, no barging past local waiters",
			nodes:    1, contendedOnly: true,
			new: func(r []*redis.Client) locker { return newFifo(r[0]) },
		},
		{
			name:     "redislock",
			settings: "defaults (no retry: Obtain fails at once when held); in the contended scenario LinearBackoff(100ms), its README example",
			nodes:    1,
			new: func(r []*redis.Client) locker {
				return &redislockLocker{c: redislock.New(r[0]), retry: func() redislock.RetryStrategy {
					return redislock.LinearBackoff(100 * time.Millisecond)
				}}
			},
		},
		{
			name:     "redislock/tuned",
			settings: "LinearBackoff(1ms): polls every millisecond, for contention",
			nodes:    1, contendedOnly: true,
			new: func(r []*redis.Client) locker {
				return &redislockLocker{c: redislock.New(r[0]), retry: func() redislock.RetryStrategy {
					return redislock.LinearBackoff(time.Millisecond)
				}}
			},
		},
		{
			name:     "rueidislock",
			settings: "rueidis/rueidislock, defaults: KeyMajority 2 (3 keys per lock on the one server, 2 taken one after the other, the third meanwhile), validity 5s extended every 2.5s, client-side caching invalidations wake waiters and end a lost lock's context; no token",
			nodes:    1,
			new: func(r []*redis.Client) locker {
				return newRueidisLock(r[0], rueidislock.LockerOption{})
			},
		},
		{
			name:     "rueidislock/one-key",
			settings: "KeyMajority 1 and NoLoopTracking: its README's settings for one Redis instance (≥ 7.0.5): one key per lock",
			nodes:    1,
			new: func(r []*redis.Client) locker {
				return newRueidisLock(r[0], rueidislock.LockerOption{KeyMajority: 1, NoLoopTracking: true})
			},
		},
		{
			name:     "redsync",
			settings: "one node, defaults: expiry 8s, 32 tries, random 50–250ms retry delay",
			nodes:    1,
			new:      func(r []*redis.Client) locker { return newRedsync(r[:1]) },
		},
		{
			name:     "redsync/tuned",
			settings: "one node, random 1–3ms retry delay and unlimited tries, for contention",
			nodes:    1, contendedOnly: true,
			new: func(r []*redis.Client) locker {
				return newRedsync(r[:1],
					redsync.WithTries(1<<30),
					redsync.WithRetryDelayFunc(func(int) time.Duration {
						return time.Millisecond + rand.N(2*time.Millisecond)
					}))
			},
		},
		{
			name:     "redsync/redlock-3",
			settings: "Redlock over 3 independent servers, defaults (quorum 2)",
			nodes:    3,
			new:      func(r []*redis.Client) locker { return newRedsync(r[:3]) },
		},
	}
}

// nullLocker is the harness's baseline: it acquires and releases
// nothing.
type nullLocker struct{}

func (nullLocker) acquire(context.Context, string) (held, error) { return nullLocker{}, nil }
func (nullLocker) release(context.Context) error                 { return nil }
func (nullLocker) renew(context.Context) error                   { return nil }

const (
	floorAcquireTokenSrc = `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0`
	floorReleaseSrc = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`
	floorRenewSrc = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`
)

// floorLocker is the bare minimum: what any owner-checked Redis lock must
// send. With token, the acquisition also issues a counter-based token in
// the same script, still one round trip.
type floorLocker struct {
	rdb   *redis.Client
	poll  time.Duration
	token bool
}

var (
	floorAcquireToken = redis.NewScript(floorAcquireTokenSrc)
	floorRelease      = redis.NewScript(floorReleaseSrc)
	floorRenew        = redis.NewScript(floorRenewSrc)
)

type floorHeld struct {
	f          *floorLocker
	key, value string
}

func randomValue() string {
	b := make([]byte, 16)
	crand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (f *floorLocker) try(ctx context.Context, key, value string) (bool, error) {
	if f.token {
		n, err := floorAcquireToken.Run(ctx, f.rdb, []string{key, key + ":token"}, value, ttl.Milliseconds()).Int64()
		return n > 0, err
	}
	return f.rdb.SetNX(ctx, key, value, ttl).Result()
}

func (f *floorLocker) acquire(ctx context.Context, name string) (held, error) {
	key, value := "floor:{"+name+"}", randomValue()
	if err := poll(ctx, f.poll, func() (bool, error) { return f.try(ctx, key, value) }); err != nil {
		return nil, err
	}
	return &floorHeld{f: f, key: key, value: value}, nil
}

// poll calls try until it reports true or fails, every interval, or until
// ctx is done: the floor's way of waiting for a held lock.
func poll(ctx context.Context, every time.Duration, try func() (bool, error)) error {
	var t *time.Timer
	for {
		ok, err := try()
		if err != nil || ok {
			return err
		}
		if t == nil {
			t = time.NewTimer(every)
			defer t.Stop()
		} else {
			t.Reset(every)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (h *floorHeld) release(ctx context.Context) error {
	n, err := floorRelease.Run(ctx, h.f.rdb, []string{h.key}, h.value).Int64()
	if err == nil && n != 1 {
		err = errors.New("floor: lock not held")
	}
	return err
}

func (h *floorHeld) renew(ctx context.Context) error {
	n, err := floorRenew.Run(ctx, h.f.rdb, []string{h.key}, h.value, ttl.Milliseconds()).Int64()
	if err == nil && n != 1 {
		err = errors.New("floor: lock not held")
	}
	return err
}

// fenceLocker is fencelock's Client.Acquire.
type fenceLocker struct{ c *fencelock.Client }

type fenceHeld struct{ l *fencelock.Lease }

func (f *fenceLocker) acquire(ctx context.Context, name string) (held, error) {
	l, err := f.c.Acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	return fenceHeld{l}, nil
}

func (h fenceHeld) release(ctx context.Context) error { return h.l.Release(ctx) }
func (h fenceHeld) renew(ctx context.Context) error   { return h.l.Renew(ctx) }

// redislockLocker is bsm/redislock's Obtain with a retry strategy made
// fresh per call (ExponentialBackoff keeps state).
type redislockLocker struct {
	c     *redislock.Client
	retry func() redislock.RetryStrategy // nil: the library's default, no retry
}

type redislockHeld struct{ l *redislock.Lock }

func (r *redislockLocker) acquire(ctx context.Context, name string) (held, error) {
	var opts *redislock.Options
	if r.retry != nil {
		opts = &redislock.Options{RetryStrategy: r.retry()}
	}
	l, err := r.c.Obtain(ctx, "redislock:"+name, ttl, opts)
	if errors.Is(err, redislock.ErrNotObtained) {
		return nil, errGaveUp
	}
	if err != nil {
		return nil, err
	}
	return redislockHeld{l}, nil
}

func (h redislockHeld) release(ctx context.Context) error { return h.l.Release(ctx) }
func (h redislockHeld) renew(ctx context.Context) error   { return h.l.Refresh(ctx, ttl, nil) }

// redsyncLocker makes a Mutex per acquisition, as redsync's users do.
type redsyncLocker struct {
	rs   *redsync.Redsync
	opts []redsync.Option
}

func newRedsync(rdbs []*redis.Client, opts ...redsync.Option) *redsyncLocker {
	pools := make([]redsyncredis.Pool, len(rdbs))
	for i, r := range rdbs {
		pools[i] = goredis.NewPool(r)
	}
	return &redsyncLocker{rs: redsync.New(pools...), opts: opts}
}

type redsyncHeld struct{ m *redsync.Mutex }

func (r *redsyncLocker) acquire(ctx context.Context, name string) (held, error) {
	m := r.rs.NewMutex("redsync:"+name, r.opts...)
	if err := m.LockContext(ctx); err != nil {
		var taken *redsync.ErrTaken
		if ctx.Err() == nil && (errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken)) {
			return nil, errGaveUp
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return redsyncHeld{m}, nil
}

func (h redsyncHeld) release(ctx context.Context) error {
	ok, err := h.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = fmt.Errorf("redsync: unlock failed")
	}
	return err
}

func (h redsyncHeld) renew(ctx context.Context) error {
	ok, err := h.m.ExtendContext(ctx)
	if err == nil && !ok {
		err = fmt.Errorf("redsync: extend failed")
	}
	return err
}
