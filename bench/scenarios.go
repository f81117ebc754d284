package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// opTimeout bounds every single lock operation, so nothing can hang.
const opTimeout = 5 * time.Second

// pairResult is one run of the uncontended or parallel scenario.
type pairResult struct {
	pairs    int
	elapsed  time.Duration
	lat      samples // acquire+release, per pair
	use      usage   // both sides, over the run
	errs     int
	firstErr error
}

func (r *pairResult) perSec() float64 { return float64(r.pairs) / r.elapsed.Seconds() }

// runPairs has goroutines acquire and release distinct lock names, one
// after the other, for d or until each has done maxOps pairs. It
// measures what both sides spend over the run on servers, if any.
func runPairs(ctx context.Context, l locker, servers []*redis.Client, prefix string, goroutines int, d time.Duration, maxOps int) *pairResult {
	results := make([]pairResult, goroutines)
	before, err := measure(ctx, servers)
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			r := &results[g]
			gp := prefix + ":" + strconv.Itoa(g) + ":"
			for i := 0; i < maxOps && ctx.Err() == nil; i++ {
				t0 := time.Now()
				if !t0.Before(end) {
					break
				}
				err := pair(ctx, l, gp+strconv.Itoa(i))
				if err != nil {
					r.errs++
					if r.firstErr == nil {
						r.firstErr = err
					}
					continue
				}
				r.lat.add(time.Since(t0))
				r.pairs++
			}
		})
	}
	wg.Wait()
	total := &pairResult{elapsed: time.Since(start)}
	if after, err2 := measure(ctx, servers); err == nil && err2 == nil {
		total.use = after.sub(before)
	}
	for i := range results {
		total.pairs += results[i].pairs
		total.errs += results[i].errs
		if total.firstErr == nil {
			total.firstErr = results[i].firstErr
		}
		total.lat.merge(&results[i].lat)
	}
	return total
}

func pair(ctx context.Context, l locker, name string) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	h, err := l.acquire(ctx, name)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	if err := h.release(ctx); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

// contResult is one run of the contended scenario.
type contResult struct {
	elapsed    time.Duration
	rtt        time.Duration // PING median during the run
	acq        int
	handoffs   int
	handoff    samples // release start → another goroutine's acquire
	wait       samples // wanting the lock → holding it; unfinished waits at the end included
	perG       []int
	gaveUp     int // calls the library gave up (redsync after its tries)
	errs       int
	firstErr   error
	violations int // two holders at once: must be 0
}

// runContended has goroutines compete for one lock name for d: each
// acquires, holds for hold, releases, pauses for think, and starts again.
// A non-nil rtt is PINGed meanwhile, to measure the round trip under load.
func runContended(ctx context.Context, l locker, rtt *redis.Client, name string, goroutines int, d, hold, think time.Duration) *contResult {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu sync.Mutex
		// The last release: who, and when it started. Written by the
		// holder only, read after acquiring.
		lastG       = -1
		lastRelease time.Time
		holders     atomic.Int32
		res         = &contResult{perG: make([]int, goroutines)}
		waits       = make([]samples, goroutines)
		handoffs    = make([]samples, goroutines)
	)
	start := time.Now()
	var wg sync.WaitGroup
	if rtt != nil {
		// The round-trip unit under this load: PINGs on the same client
		// while the goroutines compete, a few hundred per second.
		wg.Go(func() {
			var s samples
			t := time.NewTicker(2 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					res.rtt = s.percentile(50)
					return
				case <-t.C:
				}
				t0 := time.Now()
				if rtt.Ping(ctx).Err() == nil {
					s.add(time.Since(t0))
				}
			}
		})
	}
	for g := range goroutines {
		wg.Go(func() {
			for ctx.Err() == nil {
				want := time.Now()
				var h held
				for h == nil {
					var err error
					h, err = l.acquire(ctx, name)
					if ctx.Err() != nil || ended(ctx, err) {
						if h != nil {
							release(h)
						}
						waits[g].add(time.Since(want)) // censored: still waiting at the end
						return
					}
					switch {
					case err == nil:
					case errors.Is(err, errGaveUp):
						mu.Lock()
						res.gaveUp++
						mu.Unlock()
					default:
						mu.Lock()
						res.errs++
						if res.firstErr == nil {
							res.firstErr = err
						}
						mu.Unlock()
						time.Sleep(time.Millisecond)
					}
				}
				got := time.Now()
				waits[g].add(got.Sub(want))
				bad := holders.Add(1) != 1
				mu.Lock()
				res.acq++
				res.perG[g]++
				if bad {
					res.violations++
				}
				if lastG >= 0 && lastG != g {
					res.handoffs++
					handoffs[g].add(got.Sub(lastRelease))
				}
				mu.Unlock()
				if hold > 0 {
					time.Sleep(hold)
				}
				holders.Add(-1)
				mu.Lock()
				lastG, lastRelease = g, time.Now()
				mu.Unlock()
				if err := release(h); err != nil {
					mu.Lock()
					res.errs++
					if res.firstErr == nil {
						res.firstErr = err
					}
					mu.Unlock()
				}
				if think > 0 {
					time.Sleep(think)
				}
			}
		})
	}
	wg.Wait()
	res.elapsed = min(time.Since(start), d)
	for g := range goroutines {
		res.wait.merge(&waits[g])
		res.handoff.merge(&handoffs[g])
	}
	return res
}

// ended reports whether err is ctx's deadline, passed, as the library saw
// it first: a context it derived with the same deadline (fencelock's
// batches do) can fire a moment before ctx's own timer, while ctx.Err()
// is still nil.
func ended(ctx context.Context, err error) bool {
	d, ok := ctx.Deadline()
	return ok && errors.Is(err, context.DeadlineExceeded) && !time.Now().Before(d)
}

func release(h held) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	return h.release(ctx)
}

// rtResult is what one acquire, release and renew cost: round trips on
// the busiest node (requests to several nodes go out in parallel, so this
// is the number of sequential rounds), commands sent by the client over
// all nodes, and commands the servers executed (INFO commandstats, those
// run inside Lua included).
type rtResult struct {
	acq, rel, renew opCost
}

type opCost struct {
	rounds, clientCmds, serverCmds float64
	serverCPU                      time.Duration // summed over nodes, per op
}

// measureRoundTrips runs n acquisitions, then n renewals, then n
// releases, on fresh counting clients, after a warm-up that loads scripts
// and detects server features.
func measureRoundTrips(ctx context.Context, c contestant, addrs []string, prefix string, n int) (*rtResult, error) {
	rdbs, counters := countingClients(addrs[:c.nodes])
	defer func() {
		for _, r := range rdbs {
			countersByClient.Delete(r)
			r.Close()
		}
	}()
	l := c.new(rdbs)
	defer closeAll([]locker{l})
	for i := range 3 {
		h, err := l.acquire(ctx, prefix+":warm:"+strconv.Itoa(i))
		if err != nil {
			return nil, fmt.Errorf("warm-up acquire: %w", err)
		}
		if err := h.renew(ctx); err != nil {
			return nil, fmt.Errorf("warm-up renew: %w", err)
		}
		if err := h.release(ctx); err != nil {
			return nil, fmt.Errorf("warm-up release: %w", err)
		}
	}
	hs := make([]held, n)
	var res rtResult
	measure := func(cost *opCost, op func(i int) error) error {
		rts0, cmds0, srv0 := make([]int64, len(rdbs)), make([]int64, len(rdbs)), make([]int64, len(rdbs))
		cpu0 := make([]time.Duration, len(rdbs))
		for i, r := range rdbs {
			var err error
			if srv0[i], err = serverCalls(ctx, r); err != nil {
				return err
			}
			if cpu0[i], err = serverCPU(ctx, r); err != nil {
				return err
			}
			// serverCalls itself went through the hook: count from after it.
			rts0[i], cmds0[i] = counters[i].snapshot()
		}
		for i := range n {
			if err := op(i); err != nil {
				return err
			}
		}
		var maxRTs, cmds, srv int64
		var cpu time.Duration
		for i, r := range rdbs {
			rts, c := counters[i].snapshot()
			maxRTs = max(maxRTs, rts-rts0[i])
			cmds += c - cmds0[i]
			c1, err := serverCPU(ctx, r)
			if err != nil {
				return err
			}
			cpu += c1 - cpu0[i]
			s, err := serverCalls(ctx, r)
			if err != nil {
				return err
			}
			srv += s - srv0[i]
		}
		*cost = opCost{float64(maxRTs) / float64(n), float64(cmds) / float64(n), float64(srv) / float64(n), cpu / time.Duration(n)}
		return nil
	}
	err := measure(&res.acq, func(i int) (err error) {
		hs[i], err = l.acquire(ctx, prefix+":"+strconv.Itoa(i))
		return err
	})
	if err == nil {
		err = measure(&res.renew, func(i int) error { return hs[i].renew(ctx) })
	}
	if err == nil {
		err = measure(&res.rel, func(i int) error { return hs[i].release(ctx) })
	}
	if err != nil {
		for _, h := range hs {
			if h != nil {
				h.release(ctx)
			}
		}
		return nil, err
	}
	return &res, nil
}
