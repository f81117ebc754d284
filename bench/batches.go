package main

import (
	"context"
	"fmt"
	"io"
	"math/bits"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// batchSizes is a go-redis hook that counts round trips by the number of
// commands they carry, in power-of-two buckets: what fencelock's natural
// batching sends (one command per acquisition or Lua release; a native
// release is two).
type batchSizes struct {
	buckets [sizeBuckets + 1]atomic.Int64 // bucket i: 2^i to 2^(i+1)-1 commands; the last: every command
}

const sizeBuckets = 9 // 1, 2-3, ..., 128-255, and 256+ in the last

func (b *batchSizes) add(n int) {
	b.buckets[min(bits.Len(uint(n))-1, sizeBuckets-1)].Add(1)
	b.buckets[sizeBuckets].Add(int64(n))
}

func (b *batchSizes) DialHook(next redis.DialHook) redis.DialHook { return next }

func (b *batchSizes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		b.add(1)
		return next(ctx, cmd)
	}
}

func (b *batchSizes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		b.add(len(cmds))
		return next(ctx, cmds)
	}
}

// take returns the counts since the last take, and resets them.
func (b *batchSizes) take() [sizeBuckets + 1]int64 {
	var out [sizeBuckets + 1]int64
	for i := range b.buckets {
		out[i] = b.buckets[i].Swap(0)
	}
	return out
}

// batchTable prints, for each goroutine count of the scaling curve, the
// round trips fencelock sent by the commands they carried (all
// repetitions), as a share of them, and the mean commands per round
// trip.
func batchTable(w io.Writer, gs []int, seen [][sizeBuckets + 1]int64) {
	fmt.Fprint(w, "| goroutines | round trips |")
	for i := range sizeBuckets {
		lo := 1 << i
		switch {
		case i == sizeBuckets-1:
			fmt.Fprintf(w, " %d+ |", lo)
		case lo == 1:
			fmt.Fprint(w, " 1 |")
		default:
			fmt.Fprintf(w, " %d–%d |", lo, 2*lo-1)
		}
	}
	fmt.Fprint(w, " mean commands per round trip |\n|---:|---:|")
	for range sizeBuckets {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w, "---:|")
	for j, counts := range seen {
		var total int64
		for _, n := range counts[:sizeBuckets] {
			total += n
		}
		cmds := float64(counts[sizeBuckets])
		fmt.Fprintf(w, "| %d | %d |", gs[j], total)
		for _, n := range counts[:sizeBuckets] {
			if total == 0 || n == 0 {
				fmt.Fprint(w, " – |")
				continue
			}
			fmt.Fprintf(w, " %.1f%% |", 100*float64(n)/float64(total))
		}
		if total > 0 {
			fmt.Fprintf(w, " %.1f |\n", cmds/float64(total))
		} else {
			fmt.Fprintln(w, " – |")
		}
	}
	fmt.Fprintln(w)
}
