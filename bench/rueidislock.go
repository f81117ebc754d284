package main

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// rueidisLocker is github.com/redis/rueidis/rueidislock: a Locker over a
// rueidis client of its own (one auto-pipelined connection, client-side
// caching on). WithContext waits for the lock; the cancel function it
// returns releases it, and returns once the release scripts have
// answered. The lock extends itself every ExtendInterval and ends its
// context when the client-side caching invalidations say a key was lost;
// it issues no fencing token.
type rueidisLocker struct{ l rueidislock.Locker }

// newRueidisLock makes a Locker with opt on rdb's server. On a counting
// client (the round-trip scenario) its rueidis client counts into the
// same counter: every request, since rueidislock sends no pipelines of
// its own (concurrent requests share writes on its one connection, as
// go-redis's concurrent calls share none).
func newRueidisLock(rdb *redis.Client, opt rueidislock.LockerOption) locker {
	opt.ClientOption.InitAddress = []string{rdb.Options().Addr}
	if c := counterOf(rdb); c != nil {
		opt.ClientBuilder = func(o rueidis.ClientOption) (rueidis.Client, error) {
			cl, err := rueidis.NewClient(o)
			if err != nil {
				return nil, err
			}
			return countingRueidis{Client: cl, c: c}, nil
		}
	}
	l, err := rueidislock.NewLocker(opt)
	if err != nil {
		panic(err) // the harness's server answers its go-redis client
	}
	return &rueidisLocker{l: l}
}

type rueidisHeld struct{ cancel func() }

func (r *rueidisLocker) acquire(ctx context.Context, name string) (held, error) {
	_, cancel, err := r.l.WithContext(ctx, name)
	if err != nil {
		return nil, err
	}
	return rueidisHeld{cancel}, nil
}

func (r *rueidisLocker) close() { r.l.Close() }

// release cancels the lock's context: rueidislock deletes its keys and
// reports nothing (a lost key shows only as the context ended earlier).
func (h rueidisHeld) release(context.Context) error { h.cancel(); return nil }

// renew: nothing to call, the lock extends itself every ExtendInterval.
func (h rueidisHeld) renew(context.Context) error { return nil }

// countingRueidis counts a rueidis client's requests into a counter.
type countingRueidis struct {
	rueidis.Client
	c *counter
}

func (r countingRueidis) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	r.c.rts.Add(1)
	r.c.cmds.Add(1)
	return r.Client.Do(ctx, cmd)
}

func (r countingRueidis) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	r.c.rts.Add(1)
	r.c.cmds.Add(int64(len(multi)))
	return r.Client.DoMulti(ctx, multi...)
}

// countersByClient are the counting clients' counters (countingClients), so that
// a contestant with a client of its own can count into them.
var countersByClient sync.Map // *redis.Client → *counter

func counterOf(rdb *redis.Client) *counter {
	if c, ok := countersByClient.Load(rdb); ok {
		return c.(*counter)
	}
	return nil
}
