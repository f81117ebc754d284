package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/redis/go-redis/v9"
)

// How cost grows: three curves, each a table and a plot.
//
//   - scaling: pairs/s on distinct names against the number of goroutines;
//   - waiters: the handoff latency on one lock against how many wait for it;
//   - held: what keeping many leases costs the client, per lease.

// scalingRow is one contestant's pairs/s (median over repetitions) at
// each goroutine count of config.scaleGoroutines.
type scalingRow struct {
	c      contestant
	perSec []float64
	cost   []perOp // per pair, both sides
}

// scalingContestants are the rows of the scaling curve.
var scalingContestants = map[string]bool{
	"floor": true, "floor+token": true, "fencelock": true, "redislock": true, "redsync": true,
	"rueidislock": true, "rueidislock/one-key": true,
}

func (h *harness) scalingScenario(ctx context.Context, cs []contestant) []scalingRow {
	var rows []scalingRow
	for _, c := range cs {
		if scalingContestants[c.name] {
			rows = append(rows, scalingRow{c: c})
		}
	}
	lockers := make([]locker, len(rows))
	sizes := &batchSizes{}
	for i, r := range rows {
		if r.c.name != "fencelock" {
			lockers[i] = r.c.new(h.rdbs[:r.c.nodes])
			continue
		}
		// fencelock's own client counts the commands of its round
		// trips, for the batch table; no other contestant pays the hook.
		rdb := newClient(h.addrs[0])
		defer rdb.Close()
		rdb.AddHook(sizes)
		lockers[i] = r.c.new([]*redis.Client{rdb})
	}
	defer closeAll(lockers)
	h.batches = nil
	for _, g := range h.cfg.scaleGoroutines {
		runs := make([][]*pairResult, len(rows))
		for rep := 0; rep < h.cfg.reps && ctx.Err() == nil; rep++ {
			for _, i := range rotatedN(len(rows), rep) {
				if err := h.flush(ctx); err != nil {
					progress(h.log, "flush: %v", err)
				}
				p := h.prefix()
				runPairs(ctx, lockers[i], nil, p+":warm", 1, time.Second, h.cfg.warmPairs)
				sizes.take()
				res := runPairs(ctx, lockers[i], h.rdbs[:rows[i].c.nodes], p, g, h.cfg.dur, h.cfg.maxOps)
				if rows[i].c.name == "fencelock" {
					seen := sizes.take()
					if len(h.batches) == 0 || h.batchesG != g {
						h.batches, h.batchesG = append(h.batches, seen), g
					} else {
						for k, n := range seen {
							h.batches[len(h.batches)-1][k] += n
						}
					}
				}
				progress(h.log, "scaling     %3d goroutines rep %d %-12s %8.0f pairs/s errors %d", g, rep, rows[i].c.name, res.perSec(), res.errs)
				runs[i] = append(runs[i], res)
			}
		}
		for i := range rows {
			var rates, srv, cli, al []float64
			for _, res := range runs[i] {
				rates = append(rates, res.perSec())
				u := res.use.per(res.pairs)
				srv, cli, al = append(srv, u.server), append(cli, u.client), append(al, u.allocs)
			}
			rows[i].perSec = append(rows[i].perSec, median(rates))
			rows[i].cost = append(rows[i].cost, perOp{server: median(srv), client: median(cli), allocs: median(al)})
		}
	}
	return rows
}

// rotatedN is rotated for n rows.
func rotatedN(n, rep int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = (i + rep) % n
	}
	return order
}

// waitersRow is one contestant's handoff latency at each waiter count of
// config.waiters.
type waitersRow struct {
	c                 contestant
	p50, p99, waitP99 []time.Duration
	handoffsPerSec    []float64
	srvCmdsPerAcq     []float64 // commands the server executed per acquisition
	errs, violations  int
}

// waitersContestants are the rows of the waiters curve: fencelock, the
// polling peers' best settings for contention, and rueidislock, whose
// waiters wait for an invalidation or a release in the same Locker.
var waitersContestants = map[string]bool{
	"fencelock": true, "floor+token": true, "redislock/tuned": true, "rueidislock": true,
}

// waitersScenario runs the contended scenario on one lock with n waiters
// (n+1 goroutines: one holds while n wait) for each n.
func (h *harness) waitersScenario(ctx context.Context, cs []contestant) []waitersRow {
	var rows []waitersRow
	for _, c := range cs {
		if waitersContestants[c.name] {
			rows = append(rows, waitersRow{c: c})
		}
	}
	lockers := make([]locker, len(rows))
	for i, r := range rows {
		lockers[i] = r.c.new(h.rdbs[:r.c.nodes])
	}
	defer closeAll(lockers)
	for _, n := range h.cfg.waiters {
		type run struct {
			res  *contResult
			cmds float64
		}
		runs := make([][]run, len(rows))
		for rep := 0; rep < h.cfg.reps && ctx.Err() == nil; rep++ {
			for _, i := range rotatedN(len(rows), rep) {
				if err := h.flush(ctx); err != nil {
					progress(h.log, "flush: %v", err)
				}
				p := h.prefix()
				runPairs(ctx, lockers[i], nil, p+":warm", 1, time.Second, h.cfg.warmPairs)
				calls0, _ := serverCalls(ctx, h.rdbs[0])
				res := runContended(ctx, lockers[i], nil, p+":hot", n+1, h.cfg.contDur, h.cfg.hold, h.cfg.think)
				calls1, _ := serverCalls(ctx, h.rdbs[0])
				cmds := 0.0
				if res.acq > 0 {
					cmds = float64(calls1-calls0) / float64(res.acq)
				}
				progress(h.log, "waiters     %4d rep %d %-16s %6.0f handoffs/s p50 %v p99 %v, %.1f server cmds/acq, errors %d",
					n, rep, rows[i].c.name, float64(res.handoffs)/res.elapsed.Seconds(), res.handoff.percentile(50), res.handoff.percentile(99), cmds, res.errs)
				runs[i] = append(runs[i], run{res, cmds})
			}
		}
		for i := range rows {
			var p50, p99, wp99, hand, cmds []float64
			for _, r := range runs[i] {
				p50 = append(p50, float64(r.res.handoff.percentile(50)))
				p99 = append(p99, float64(r.res.handoff.percentile(99)))
				wp99 = append(wp99, float64(r.res.wait.percentile(99)))
				hand = append(hand, float64(r.res.handoffs)/r.res.elapsed.Seconds())
				cmds = append(cmds, r.cmds)
				rows[i].errs += r.res.errs
				rows[i].violations += r.res.violations
			}
			rows[i].p50 = append(rows[i].p50, time.Duration(median(p50)))
			rows[i].p99 = append(rows[i].p99, time.Duration(median(p99)))
			rows[i].waitP99 = append(rows[i].waitP99, time.Duration(median(wp99)))
			rows[i].handoffsPerSec = append(rows[i].handoffsPerSec, median(hand))
			rows[i].srvCmdsPerAcq = append(rows[i].srvCmdsPerAcq, median(cmds))
		}
	}
	return rows
}

// minHeldForHeap is the fewest held leases whose heap per lease stands
// out of the heap's own noise (a collection, go-redis's buffers).
const minHeldForHeap = 1000

// heldRow is what keeping n leases costs, measured over a window after
// acquiring them.
type heldRow struct {
	n          int
	heapPer    float64 // heap bytes per held lease
	goroutines int     // more than before acquiring
	renewals   float64 // per second, over the window
	clientCPU  float64 // µs of client CPU per second of the window
	cpuPer     float64 // µs of client CPU per renewal
	serverCPU  float64 // µs of server CPU per second of the window
	lost, errs int
	window     time.Duration
}

// heldScenario acquires n leases on one Client with the default options
// (TTL 10s, renewed every TTL/3), for each n of config.held, and measures
// over a window of config.heldWindow what keeping them costs: the heap
// and goroutines they take (after a GC, against before acquiring), the
// renewals per second (the RenewDone hook) and the CPU time of both
// sides. Then it releases them all.
func (h *harness) heldScenario(ctx context.Context) []heldRow {
	var rows []heldRow
	for _, n := range h.cfg.held {
		if ctx.Err() != nil {
			break
		}
		if err := h.flush(ctx); err != nil {
			progress(h.log, "flush: %v", err)
		}
		row, err := h.held(ctx, n)
		if err != nil {
			progress(h.log, "held %d: %v", n, err)
			continue
		}
		progress(h.log, "held     %6d leases: %6.0f heap bytes, %d goroutines, %7.0f renewals/s, client %8.0f µs/s (%.1f µs/renewal), server %8.0f µs/s, lost %d, errors %d",
			n, row.heapPer, row.goroutines, row.renewals, row.clientCPU, row.cpuPer, row.serverCPU, row.lost, row.errs)
		rows = append(rows, row)
	}
	return rows
}

func (h *harness) held(ctx context.Context, n int) (heldRow, error) {
	row := heldRow{n: n, window: h.cfg.heldWindow}
	var renewals, lost atomic.Int64
	c := fencelock.New(h.rdbs[0], &fencelock.Options{Hooks: &fencelock.Hooks{
		RenewDone: func(_ context.Context, i fencelock.RenewDoneInfo) {
			if i.Err == nil {
				renewals.Add(1)
			}
		},
		LeaseLost: func(context.Context, fencelock.LeaseLostInfo) { lost.Add(1) },
	}})
	heap0, g0 := heapAfterGC(), runtime.NumGoroutine()
	leases := make([]*fencelock.Lease, n)
	prefix := h.prefix()
	var wg sync.WaitGroup
	var errs atomic.Int64
	const workers = 16
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				l, err := c.TryAcquire(ctx, prefix+":"+strconv.Itoa(i))
				if err != nil {
					errs.Add(1)
					continue
				}
				leases[i] = l
			}
		})
	}
	wg.Wait()
	row.heapPer = float64(int64(heapAfterGC())-int64(heap0)) / float64(n)
	row.goroutines = runtime.NumGoroutine() - g0
	r0 := renewals.Load()
	u0, err := measure(ctx, h.rdbs[:1])
	if err != nil {
		return row, err
	}
	start := time.Now()
	select {
	case <-ctx.Done():
	case <-time.After(h.cfg.heldWindow):
	}
	u1, err := measure(ctx, h.rdbs[:1])
	if err != nil {
		return row, err
	}
	secs := time.Since(start).Seconds()
	u := u1.sub(u0)
	row.renewals = float64(renewals.Load()-r0) / secs
	row.clientCPU = float64(u.client) / float64(time.Microsecond) / secs
	row.serverCPU = float64(u.server) / float64(time.Microsecond) / secs
	if row.renewals > 0 {
		row.cpuPer = row.clientCPU / row.renewals
	}
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if l := leases[i]; l != nil {
					if err := l.Release(ctx); err != nil && lost.Load() == 0 {
						errs.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	row.lost, row.errs = int(lost.Load()), int(errs.Load())
	return row, nil
}

// heapAfterGC returns the bytes of live heap objects after a collection.
func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// callCost is the server's cost of one redis.call inside a script.
type callCost struct {
	name     string
	min, p50 float64 // ns per call, over repetitions
}

// callBodies are the commands the scripts run, each timed alone in a
// loop inside one script: no network, no parsing of the request, only
// the call from Lua and the command itself. Keys named new are new in
// every iteration, as a new lock name's are.
var callBodies = []struct{ name, body string }{
	{"GET (missing key)", `redis.call('GET', 'nokey')`},
	{"pcall GET (existing key)", `redis.pcall('GET', 'k1')`},
	{"SET NX PX (new key)", `redis.call('SET', 'l' .. i, 'owner-0123456789abcdef', 'NX', 'PX', 10000)`},
	{"INCR (new key)", `redis.call('INCR', 'i' .. i)`},
	{"SET PX (new key, token value)", `redis.call('SET', 'c' .. i, '1765432123456789', 'PX', 86400000)`},
	{"SET (new key, token value)", `redis.call('SET', 's' .. i, '1765432123456789')`},
	{"TIME, to a number", `local t = redis.call('TIME') local x = tonumber(t[1]) * 1000000 + tonumber(t[2])`},
	{"string.format('%d')", `local s = string.format('%d', 1765432123456789 + i)`},
	{"DEL (1 missing key)", `redis.call('DEL', 'nokey')`},
	{"DEL (2 missing keys)", `redis.call('DEL', 'nokey', 'nokey2')`},
	{"PUBLISH (no subscriber)", `redis.call('PUBLISH', 'chan', '')`},
	{"key name concatenation (Lua only)", `local k = 'l' .. i`},
	// Whole success paths, new keys each time, to compare the scripts'
	// own work without the request around them.
	{"floor+token acquire: SET NX PX, INCR", `if redis.call('SET', 'l' .. i, 'owner-0123456789abcdef', 'NX', 'PX', 10000) then redis.call('INCR', 't' .. i) end`},
	{"fencelock acquire: GET, SET NX PX, TIME, SET PX", `local s = redis.call('GET', 't' .. i)
if redis.call('SET', 'l' .. i, 'owner-0123456789abcdef', 'NX', 'PX', 10000) then
  local t = redis.call('TIME') local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  redis.call('SET', 't' .. i, string.format('%d', now), 'PX', 86400000)
end`},
	{"floor release: GET, DEL (after a SET)", `redis.call('SET', 'r' .. i, 'o') if redis.call('GET', 'r' .. i) == 'o' then redis.call('DEL', 'r' .. i) end`},
	{"fencelock release: pcall GET, DEL 2 keys (after a SET)", `redis.call('SET', 'r' .. i, 'o') if redis.pcall('GET', 'r' .. i) == 'o' then redis.call('DEL', 'r' .. i, 'w' .. i) end`},
}

// callsScenario times each of callBodies inside one script, iterations
// times, config.reps+4 times over, on a flushed server.
func (h *harness) callsScenario(ctx context.Context) []callCost {
	const iterations = 20000
	rdb := h.rdbs[0]
	var out []callCost
	for _, b := range callBodies {
		src := fmt.Sprintf(`local t0 = redis.call('TIME')
for i = 1, %d do %s end
local t1 = redis.call('TIME')
return (t1[1] - t0[1]) * 1000000 + (t1[2] - t0[2])`, iterations, b.body)
		var ns []float64
		for range h.cfg.reps + 4 {
			if err := h.flush(ctx); err != nil {
				progress(h.log, "flush: %v", err)
			}
			rdb.Set(ctx, "k1", "owner-0123456789abcdef", 0)
			us, err := rdb.Eval(ctx, src, nil).Int64()
			if err != nil {
				progress(h.log, "calls %s: %v", b.name, err)
				break
			}
			ns = append(ns, float64(us)*1000/iterations)
		}
		if len(ns) == 0 {
			continue
		}
		lo := ns[0]
		for _, x := range ns {
			lo = min(lo, x)
		}
		out = append(out, callCost{name: b.name, min: lo, p50: median(ns)})
		progress(h.log, "calls       %-36s min %5.0f ns, median %5.0f ns", b.name, lo, median(ns))
	}
	return out
}
