package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// report holds every scenario's rows, in contestant order.
type report struct {
	cfg         config
	started     time.Time
	env         string
	host        host
	load        [2]float64 // 1-minute load average at the start and the end
	uncontended []pairRow
	parallel    []pairRow
	contended   []contRow
	roundTrips  []rtRow
	quorumNote  string

	calls   []callCost   // 5
	scaling []scalingRow // 7
	batches [][sizeBuckets + 1]int64
	waiters []waitersRow // 8
	held    []heldRow    // 9
}

// pairRow is the medians over repetitions of one contestant's runs.
type pairRow struct {
	c                      contestant
	perSec                 float64
	xFloor, xFloorToken    float64 // medians of per-repetition ratios
	p50, p99               time.Duration
	xP50                   float64 // p50 over floor+token's, median of per-repetition ratios
	errs                   int
	firstErr               error
	perRep                 []float64
	hasFloor, hasFloorTokn bool
	// cost per pair: both sides' CPU (µs) and the allocations, less the
	// harness's own (the baseline row's); xServer and xClient are the
	// CPU over floor+token's, medians of per-repetition ratios.
	cost             perOp
	xServer, xClient float64
}

type contRow struct {
	c                        contestant
	acqPerSec, handoffPerSec float64
	handoffP50, handoffP99   time.Duration
	handoffP50RT             float64 // in PING round trips of the same run
	rtt                      time.Duration
	waitP99, waitMax         time.Duration
	minG, maxG               float64
	jain                     float64
	gaveUp, errs, violations int
	firstErr                 error
	xRedsync                 float64 // handoffs/s over redsync's default, per repetition
}

type rtRow struct {
	c   contestant
	res *rtResult
	err error
}

// run starts the servers, runs the selected scenarios and stops the
// servers again. Progress goes to log.
func run(ctx context.Context, cfg config, log io.Writer) (*report, error) {
	var cs []contestant
	for _, c := range append(contestants(), quorumContestants()...) {
		if c.floor || c.baseline || c.limit != nil || cfg.only == nil || cfg.only.MatchString(c.name) {
			cs = append(cs, c)
		}
	}
	nodes := 1
	for _, c := range cs {
		nodes = max(nodes, c.nodes)
	}
	var addrs []string
	for range nodes {
		s, err := redistest.Launch(nil)
		if err != nil {
			return nil, err
		}
		defer s.Close()
		addrs = append(addrs, s.Addr())
	}
	rdbs := make([]*redis.Client, nodes)
	for i, a := range addrs {
		rdbs[i] = newClient(a)
		defer rdbs[i].Close()
	}
	r := &report{cfg: cfg, started: time.Now()}
	if len(quorumContestants()) > 0 {
		r.quorumNote = ""
	}
	r.env = environment(ctx, rdbs[0])
	r.host, r.load = hostInfo(), [2]float64{loadAverage(), -1}
	defer func() { r.load[1] = loadAverage() }()
	h := &harness{cfg: cfg, rdbs: rdbs, addrs: addrs, log: log}

	// Rows for the uncontended and parallel, contended and round-trip
	// scenarios.
	var plain, parallel, locks, rt []contestant
	for _, c := range cs {
		if !c.contendedOnly {
			parallel = append(parallel, c)
			if c.limit == nil {
				plain = append(plain, c)
			}
		}
		if !c.baseline && !c.transport && c.limit == nil {
			locks = append(locks, c)
			if !c.contendedOnly {
				rt = append(rt, c)
			}
		}
	}
	if cfg.scenarios["1"] {
		r.uncontended = h.pairScenario(ctx, "uncontended", plain, 1)
	}
	if cfg.scenarios["2"] {
		r.parallel = h.pairScenario(ctx, "parallel", parallel, cfg.goroutines)
	}
	if cfg.scenarios["3"] {
		r.contended = h.contendedScenario(ctx, locks)
	}
	if cfg.scenarios["5"] {
		r.calls = h.callsScenario(ctx)
	}
	if cfg.scenarios["7"] {
		r.scaling = h.scalingScenario(ctx, plain)
		r.batches = h.batches
	}
	if cfg.scenarios["8"] {
		r.waiters = h.waitersScenario(ctx, locks)
	}
	if cfg.scenarios["9"] {
		r.held = h.heldScenario(ctx)
	}
	if cfg.scenarios["4"] || cfg.scenarios["6"] {
		for _, c := range rt {
			if err := h.flush(ctx); err != nil {
				return nil, err
			}
			res, err := measureRoundTrips(ctx, c, addrs, "rt:"+c.name, cfg.rtOps)
			progress(log, "round trips  %-22s %v", c.name, err)
			r.roundTrips = append(r.roundTrips, rtRow{c: c, res: res, err: err})
		}
	}
	return r, ctx.Err()
}

type harness struct {
	cfg   config
	rdbs  []*redis.Client
	addrs []string
	log   io.Writer
	seq   int

	batches  [][sizeBuckets + 1]int64 // scenario 7: fencelock's round trips by size, per goroutine count
	batchesG int                      // the goroutine count of the last of batches
}

// flush empties every server, so each run starts from the same state.
func (h *harness) flush(ctx context.Context) error {
	for _, r := range h.rdbs {
		if err := r.FlushAll(ctx).Err(); err != nil {
			return err
		}
	}
	return nil
}

func (h *harness) prefix() string {
	h.seq++
	return "r" + strconv.Itoa(h.seq)
}

// rotated returns cs starting at index rep, so that over the
// repetitions no contestant always runs first or right after another.
func rotated(cs []contestant, rep int) []int {
	order := make([]int, len(cs))
	for i := range cs {
		order[i] = (i + rep) % len(cs)
	}
	return order
}

func (h *harness) pairScenario(ctx context.Context, scenario string, cs []contestant, goroutines int) []pairRow {
	lockers := make([]locker, len(cs))
	for i, c := range cs {
		lockers[i] = c.new(h.rdbs[:c.nodes])
	}
	defer closeAll(lockers)
	runs := make([][]*pairResult, len(cs)) // [contestant][rep]
	for rep := 0; rep < h.cfg.reps && ctx.Err() == nil; rep++ {
		for _, i := range rotated(cs, rep) {
			if ctx.Err() != nil {
				break
			}
			if err := h.flush(ctx); err != nil {
				progress(h.log, "flush: %v", err)
			}
			p := h.prefix()
			var res *pairResult
			if l := cs[i].limit; l != nil {
				res = runLimit(ctx, l, h.addrs[0], h.rdbs[0], p, h.cfg.dur)
			} else {
				runPairs(ctx, lockers[i], nil, p+":warm", 1, time.Second, h.cfg.warmPairs)
				res = runPairs(ctx, lockers[i], h.rdbs[:cs[i].nodes], p, goroutines, h.cfg.dur, h.cfg.maxOps)
			}
			c := res.use.per(res.pairs)
			progress(h.log, "%-11s rep %d %-22s %8.0f pairs/s  server %5.1fµs client %5.1fµs allocs %5.1f per pair  errors %d",
				scenario, rep, cs[i].name, res.perSec(), c.server, c.client, c.allocs, res.errs)
			runs[i] = append(runs[i], res)
		}
	}
	floor, floorToken, harness := -1, -1, -1
	for i, c := range cs {
		switch {
		case c.floor:
			floor = i
		case c.name == "floor+token":
			floorToken = i
		case c.baseline:
			harness = i
		}
	}
	rows := make([]pairRow, len(cs))
	for i, c := range cs {
		row := pairRow{c: c}
		var rates, p50s, p99s, xf, xft, xp50, srv, cli, allocs, xsrv, xcli []float64
		for rep, res := range runs[i] {
			u := res.use.per(res.pairs)
			srv, cli = append(srv, u.server), append(cli, u.client)
			a := u.allocs
			if harness >= 0 && harness != i && c.limit == nil && rep < len(runs[harness]) {
				h := runs[harness][rep]
				a -= h.use.per(h.pairs).allocs // the harness's own, per pair
			}
			allocs = append(allocs, a)
			if floorToken >= 0 && rep < len(runs[floorToken]) {
				ft := runs[floorToken][rep]
				f := ft.use.per(ft.pairs)
				if f.server > 0 && f.client > 0 {
					xsrv, xcli = append(xsrv, u.server/f.server), append(xcli, u.client/f.client)
				}
			}
			rates = append(rates, res.perSec())
			p50s = append(p50s, float64(res.lat.percentile(50)))
			p99s = append(p99s, float64(res.lat.percentile(99)))
			row.errs += res.errs
			if row.firstErr == nil {
				row.firstErr = res.firstErr
			}
			if floor >= 0 && rep < len(runs[floor]) {
				xf = append(xf, res.perSec()/runs[floor][rep].perSec())
			}
			if floorToken >= 0 && rep < len(runs[floorToken]) {
				ft := runs[floorToken][rep]
				xft = append(xft, res.perSec()/ft.perSec())
				if p := ft.lat.percentile(50); p > 0 {
					xp50 = append(xp50, float64(res.lat.percentile(50))/float64(p))
				}
			}
		}
		row.cost = perOp{server: median(srv), client: median(cli), allocs: median(allocs)}
		row.xServer, row.xClient = median(xsrv), median(xcli)
		row.perRep = rates
		row.perSec = median(rates)
		row.p50, row.p99 = time.Duration(median(p50s)), time.Duration(median(p99s))
		row.xFloor, row.xFloorToken, row.xP50 = median(xf), median(xft), median(xp50)
		row.hasFloor, row.hasFloorTokn = len(xf) > 0, len(xft) > 0
		rows[i] = row
	}
	return rows
}

func (h *harness) contendedScenario(ctx context.Context, cs []contestant) []contRow {
	lockers := make([]locker, len(cs))
	for i, c := range cs {
		lockers[i] = c.new(h.rdbs[:c.nodes])
	}
	defer closeAll(lockers)
	runs := make([][]*contResult, len(cs))
	for rep := 0; rep < h.cfg.reps && ctx.Err() == nil; rep++ {
		for _, i := range rotated(cs, rep) {
			if ctx.Err() != nil {
				break
			}
			if err := h.flush(ctx); err != nil {
				progress(h.log, "flush: %v", err)
			}
			p := h.prefix()
			runPairs(ctx, lockers[i], nil, p+":warm", 1, time.Second, h.cfg.warmPairs)
			res := runContended(ctx, lockers[i], h.rdbs[0], p+":hot", h.cfg.goroutines, h.cfg.contDur, h.cfg.hold, h.cfg.think)
			progress(h.log, "contended   rep %d %-22s %6.0f acq/s %6.0f handoffs/s jain %.3f errors %d %v",
				rep, cs[i].name, float64(res.acq)/res.elapsed.Seconds(), float64(res.handoffs)/res.elapsed.Seconds(),
				jain(res.perG), res.errs, res.firstErr)
			runs[i] = append(runs[i], res)
		}
	}
	redsyncDefault := -1
	for i, c := range cs {
		if c.name == "redsync" {
			redsyncDefault = i
		}
	}
	rows := make([]contRow, len(cs))
	for i, c := range cs {
		row := contRow{c: c}
		var acq, hand, hp50, hp99, hrt, rtt, wp99, wmax, ming, maxg, jn, xr []float64
		for rep, res := range runs[i] {
			s := res.elapsed.Seconds()
			acq = append(acq, float64(res.acq)/s)
			hand = append(hand, float64(res.handoffs)/s)
			p50 := res.handoff.percentile(50)
			hp50 = append(hp50, float64(p50))
			hp99 = append(hp99, float64(res.handoff.percentile(99)))
			if res.rtt > 0 {
				hrt = append(hrt, float64(p50)/float64(res.rtt))
			}
			rtt = append(rtt, float64(res.rtt))
			wp99 = append(wp99, float64(res.wait.percentile(99)))
			wmax = append(wmax, float64(res.wait.max()))
			lo, hi := res.perG[0], res.perG[0]
			for _, n := range res.perG {
				lo, hi = min(lo, n), max(hi, n)
			}
			ming = append(ming, float64(lo))
			maxg = append(maxg, float64(hi))
			jn = append(jn, jain(res.perG))
			row.gaveUp += res.gaveUp
			row.errs += res.errs
			row.violations += res.violations
			if row.firstErr == nil {
				row.firstErr = res.firstErr
			}
			if redsyncDefault >= 0 && rep < len(runs[redsyncDefault]) {
				if o := runs[redsyncDefault][rep]; o.handoffs > 0 {
					xr = append(xr, float64(res.handoffs)/s/(float64(o.handoffs)/o.elapsed.Seconds()))
				}
			}
		}
		row.acqPerSec, row.handoffPerSec = median(acq), median(hand)
		row.handoffP50, row.handoffP99 = time.Duration(median(hp50)), time.Duration(median(hp99))
		row.handoffP50RT, row.rtt = median(hrt), time.Duration(median(rtt))
		row.waitP99, row.waitMax = time.Duration(median(wp99)), time.Duration(median(wmax))
		row.minG, row.maxG, row.jain = median(ming), median(maxg), median(jn)
		row.xRedsync = median(xr)
		rows[i] = row
	}
	return rows
}

// closeAll closes the lockers that hold resources of their own.
func closeAll(ls []locker) {
	for _, l := range ls {
		if c, ok := l.(interface{ close() }); ok {
			c.close()
		}
	}
}

// environment describes the machine for the report.
func environment(ctx context.Context, rdb *redis.Client) string {
	server := "redis-server ?"
	if info, err := rdb.Info(ctx, "server").Result(); err == nil {
		redis, valkey := "", ""
		for line := range strings.SplitSeq(info, "\n") {
			line = strings.TrimSpace(line)
			if s, ok := strings.CutPrefix(line, "redis_version:"); ok {
				redis = s
			}
			if s, ok := strings.CutPrefix(line, "valkey_version:"); ok {
				valkey = s // Valkey's redis_version is the Redis it is compatible with
			}
		}
		switch {
		case valkey != "":
			server = "valkey-server " + valkey
		case redis != "":
			server = "redis-server " + redis
		}
	}
	return fmt.Sprintf("%d CPUs (GOMAXPROCS %d), %s %s/%s, %s",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH, server)
}
