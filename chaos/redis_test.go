package chaos_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fencelock/fencelock/chaos"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/redisfence"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestDelayedRequestRedis is TestDelayedRequest with the resource kept in
// a Redis of its own by redisfence, reached by each holder through its
// own proxy. The fence check runs inside Redis, so only the holders'
// history is checked (there is no resource journal).
func TestDelayedRequestRedis(t *testing.T) {
	runScenario(t, scenario{name: "delayed-request", adapter: "redis", shortRuns: 3, setup: func(t *testing.T) *world {
		s := newStandalone(t)
		res := redistest.New(t)
		direct := res.Client(t)
		var proxied []*redis.Client
		var proxies []*redistest.Proxy
		for range holderCount {
			p := redistest.NewProxy(t, res.Addr())
			rdb := redis.NewClient(redisOptions(p.Addr()))
			t.Cleanup(func() { rdb.Close() })
			proxies = append(proxies, p)
			proxied = append(proxied, rdb)
		}
		store := func(r *run, rdb *redis.Client) fence.Store {
			prefix := r.name + ":" // each run its own keys
			if !r.fenced {
				return &plainRedis{rdb: rdb, prefix: prefix}
			}
			return redisfence.New(rdb, &redisfence.Options{Prefix: prefix})
		}
		w := s.world(func(r *run) (*chaos.Journal, func(int) fence.Store) {
			// The journal is used only to Load the final state.
			j := &chaos.Journal{Store: store(r, direct)}
			return j, func(i int) fence.Store { return store(r, proxied[i]) }
		}, fault{
			shortOnly: true,
			hold:      func(r *rand.Rand) time.Duration { return between(r, 1, 1.5) },
			inject:    func(t *testing.T, v int) { proxies[v].SetLatency(6 * ttl) },
			heal:      func(t *testing.T, v int) { proxies[v].SetLatency(0) },
		})
		w.landed = func(r *run) ([]int64, error) {
			if p, ok := store(r, direct).(*plainRedis); ok {
				return p.landed(context.Background())
			}
			return nil, nil
		}
		return w
	}})
}

// plainRedis is the unfenced control for Redis: GET, SET and DEL that
// ignore fences.
type plainRedis struct {
	rdb    *redis.Client
	prefix string
}

// Every call appends the operation's ID to a log in the same
// transaction: the order in which the calls landed at the resource, for
// the checks (the resource journal that redisfence, whose check runs in
// Lua, cannot offer).
func (p *plainRedis) Put(ctx context.Context, resource string, f fence.Fence, value []byte) error {
	_, err := p.rdb.TxPipelined(ctx, func(tx redis.Pipeliner) error {
		tx.Set(ctx, p.prefix+resource, value, 0)
		p.log(ctx, tx)
		return nil
	})
	return err
}

func (p *plainRedis) log(ctx context.Context, tx redis.Pipeliner) {
	if _, id, ok := chaos.OpFrom(ctx); ok {
		tx.RPush(ctx, p.prefix+"landed", id)
	}
}

// landed returns the IDs of the calls in the order they landed.
func (p *plainRedis) landed(ctx context.Context) ([]int64, error) {
	var ids []int64
	err := p.rdb.LRange(ctx, p.prefix+"landed", 0, -1).ScanSlice(&ids)
	return ids, err
}

func (p *plainRedis) Get(ctx context.Context, resource string, f fence.Fence) ([]byte, error) {
	var get *redis.StringCmd
	_, err := p.rdb.TxPipelined(ctx, func(tx redis.Pipeliner) error {
		get = tx.Get(ctx, p.prefix+resource)
		p.log(ctx, tx)
		return nil
	})
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return get.Bytes()
}

func (p *plainRedis) Delete(ctx context.Context, resource string, f fence.Fence) error {
	_, err := p.rdb.TxPipelined(ctx, func(tx redis.Pipeliner) error {
		tx.Del(ctx, p.prefix+resource)
		p.log(ctx, tx)
		return nil
	})
	return err
}

func (p *plainRedis) Load(ctx context.Context, resource string) ([]byte, fence.Fence, error) {
	v, err := p.rdb.Get(ctx, p.prefix+resource).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fence.Fence{}, nil
	}
	return v, fence.Fence{}, err
}
