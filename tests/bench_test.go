package tests

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The benchmarks report allocations per acquire+release; BenchmarkFloor
// gives go-redis's own for the bare minimum on the same client (SET NX
// PX plus a Lua compare-and-delete), to compare with. Peers are compared
// in the bench module (bench/README.md). Each benchmark starts its own
// redis-server.

func benchClient(b *testing.B) (*redis.Client, *fencelock.Client) {
	b.Helper()
	rdb := redistest.New(b).Client(b)
	return rdb, newClient(b, rdb, nil)
}

// BenchmarkAcquireRelease: one goroutine, one free lock, acquired and
// released in turn.
func BenchmarkAcquireRelease(b *testing.B) {
	_, locks := benchClient(b)
	benchAcquireRelease(b, locks)
}

// benchAcquireRelease acquires and releases one free lock in turn.
func benchAcquireRelease(b *testing.B, locks *fencelock.Client) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := locks.Acquire(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcquireReleaseParallel: GOMAXPROCS goroutines, each on a lock
// of its own.
func BenchmarkAcquireReleaseParallel(b *testing.B) { benchAcquireReleaseParallel(b, false) }

// benchAcquireReleaseParallel acquires and releases a lock of its own on
// each goroutine; with watched, each lease's Context is asked for first.
func benchAcquireReleaseParallel(b *testing.B, watched bool) {
	_, locks := benchClient(b)
	ctx := context.Background()
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		name := "bench-" + strconv.FormatInt(n.Add(1), 10)
		for pb.Next() {
			l, err := locks.Acquire(ctx, name)
			if err != nil {
				b.Error(err)
				return
			}
			if watched {
				_ = l.Context()
			}
			if err := l.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkHandoff: 16 goroutines (8 per GOMAXPROCS) contend for one
// lock; each op is one acquisition, most of them a handoff from another
// goroutine's release, which wakes the waiters through pub/sub.
func BenchmarkHandoff(b *testing.B) {
	_, locks := benchClient(b)
	ctx := context.Background()
	var last, handoffs atomic.Int64
	var id atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		me := id.Add(1)
		for pb.Next() {
			l, err := locks.Acquire(ctx, "hot")
			if err != nil {
				b.Error(err)
				return
			}
			if prev := last.Swap(me); prev != 0 && prev != me {
				handoffs.Add(1)
			}
			if err := l.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(handoffs.Load())/float64(b.N), "handoffs/op")
}

var (
	floorRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)
)

// BenchmarkFloor is BenchmarkAcquireRelease's bare minimum: SET NX PX
// and a Lua compare-and-delete on the same go-redis client, no token.
func BenchmarkFloor(b *testing.B) {
	rdb, _ := benchClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ok, err := rdb.SetNX(ctx, "floor", "owner-value-0123456789", fencelock.MaxTTL).Result()
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
		if err := floorRelease.Run(ctx, rdb, []string{"floor"}, "owner-value-0123456789").Err(); err != nil {
			b.Fatal(err)
		}
	}
}
