package chaos_test

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/chaos"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

var (
	seedFlag = flag.Uint64("chaos.seed", 0, "replay one run per mode with this seed (env CHAOS_SEED)")
	runsFlag = flag.Int("chaos.runs", 0, "long mode: randomized runs per scenario and mode, and print a table (env CHAOS_RUNS)")
	keepFlag = flag.String("chaos.keep", "", "write the history and visualization of every run that violated an invariant under this directory (env CHAOS_KEEP)")
)

// Timing of every run. The TTL is short so that a run of about a second
// sees many leases come and go.
const (
	ttl         = 50 * time.Millisecond
	runFor      = time.Second
	opTimeout   = 2 * ttl
	checkBound  = 20 * time.Second // porcupine's bound per history
	holderCount = 3
)

func TestMain(m *testing.M) {
	flag.Parse()
	redis.SetLogger(quietLogger{}) // faults make go-redis log; the runs report
	if *seedFlag == 0 {
		if s, err := strconv.ParseUint(os.Getenv("CHAOS_SEED"), 10, 64); err == nil {
			*seedFlag = s
		}
	}
	if *runsFlag == 0 {
		if n, err := strconv.Atoi(os.Getenv("CHAOS_RUNS")); err == nil {
			*runsFlag = n
		}
	}
	if *keepFlag == "" {
		*keepFlag = os.Getenv("CHAOS_KEEP")
	}
	code := m.Run()
	if *runsFlag > 0 {
		printTable(os.Stdout)
	}
	os.Exit(code)
}

// A scenario is one kind of fault, injected into runs of both modes:
// fenced (the adapter's real store) and unfenced (chaos.Plain).
type scenario struct {
	name    string
	adapter string // the resource the holders write to
	// shortRuns is the number of runs per mode in short mode.
	shortRuns int
	// control names the invariants the scenario exists for (chaos.Inv*):
	// each must be violated by at least chaos.ControlShare percent of its
	// unfenced runs; violations of other invariants do not count.
	control []string
	// setup starts the servers once per test; every run then uses its
	// own lock name and a new resource.
	setup func(t *testing.T) *world
}

// The negative controls: what a scenario's unfenced runs must break.
var (
	// staleWrite: a holder writes after its lease ended, a newer holder
	// having read and written meanwhile; unfenced, the resource takes the
	// write, which the holders' own history, the order of the tokens it
	// accepted and the counter all show.
	staleWrite = []string{chaos.InvLinearizable, chaos.InvTokenOrder, chaos.InvLostUpdate}
	// lateRequest: a request its holder gave up on lands after a newer
	// holder's; the holder never learns what became of it (its history
	// holds an unknown, which may have taken effect at any time), so it is
	// the resource's journal that shows the stale write taken.
	lateRequest = []string{chaos.InvResourceLinearizable, chaos.InvTokenOrder}
	// staleOrder: a holder writes after its lease ended and a newer
	// holder's write was taken, as in staleWrite, but the newer holders'
	// read-modify-writes may be cut short (TestHolderCrash kills a holder
	// that has just read): the stale write then often overwrites no
	// increment, and lost-update is no stable control (5 of 9 unfenced
	// runs seen, against 7 of 9 for the other two).
	staleOrder = []string{chaos.InvLinearizable, chaos.InvTokenOrder}
)

// world is what a scenario's runs share.
type world struct {
	// lock returns holder i's lock client.
	lock func(i int) *fencelock.Client
	// resource makes the run's resource and each holder's view of it.
	resource func(r *run) (j *chaos.Journal, view func(i int) fence.Store)
	// holders starts the holders, by default goroutines; it returns when
	// they are all done, after stop is closed.
	holders func(r *run, stop <-chan struct{})
	// nemesis injects faults until the run should end, then heals them
	// all. It runs in the test goroutine.
	nemesis func(r *run)
	// settle, if set, restores the deployment between runs.
	settle func(t *testing.T)
	// landed, if set, returns the resource's journal where the resource
	// keeps it itself (a Redis), given the holders' ops.
	landed func(r *run, ops []chaos.Op) ([]chaos.Op, error)
	// permits, if not 0, makes the run's lock name a semaphore of that
	// many permits, which the holders take instead of the lock.
	permits int
	// starts, if set, says that holders closes the run's started once
	// the holders are ready (processes, which a loaded machine starts
	// slowly): the nemesis's runFor counts from then, not from the
	// run's beginning.
	starts bool
	// healWhen, if set, is what a fault waits for, besides its hold,
	// before it is healed: a channel closed once the fault has done its
	// work (aimed: when it was aimed), however slowly the machine runs.
	healWhen func(r *run, aimed time.Time) <-chan struct{}
}

// run is one randomized run.
type run struct {
	t      *testing.T
	w      *world
	seed   uint64
	fenced bool
	name   string // the lock name
	rand   *rand.Rand
	rec    *chaos.Recorder
	j      *chaos.Journal
	view   func(i int) fence.Store
	reads  chan readEvent
	// nemesisDone is closed when the nemesis has returned: no read is
	// offered to it after that.
	nemesisDone chan struct{}
	// started is closed when the holders are ready (world.starts).
	started chan struct{}
	faults  int
	// notes say why the nemesis could not inject a fault it meant to:
	// they make a fenced run inconclusive.
	notes []string
	// cleanups run when the run has been checked, last first.
	cleanups []func()
}

// cleanup registers f to run when the run has been checked (e.g. to drop
// the run's tables).
func (r *run) cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

// readEvent tells the nemesis that a holder has just read the counter
// with its fence and is about to compute for a while; the nemesis replies
// with a channel the holder must wait on before writing (nil: none).
type readEvent struct {
	client  int
	fence   fence.Fence
	compute time.Duration
	reply   chan (<-chan struct{})
}

// afterRead offers a read to the nemesis and waits for its answer, for
// as long as the nemesis runs: a read made while it injects or heals a
// fault waits for it rather than pass unseen. Every nemesis answers every
// read it takes.
func (r *run) afterRead(client int, f fence.Fence, compute time.Duration) <-chan struct{} {
	ev := readEvent{client: client, fence: f, compute: compute, reply: make(chan (<-chan struct{}), 1)}
	select {
	case r.reads <- ev:
		return <-ev.reply
	case <-r.nemesisDone:
		return nil
	}
}

// note records why the nemesis could not inject a fault.
func (r *run) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// tally adds up the runs of one scenario and mode for the table.
type tally struct {
	scenario, adapter, mode                       string
	runs, faults, ops, accepted, stale, violating int
	resourceStale, timeouts, inconclusive         int
	byInvariant                                   map[string]int
	start                                         time.Time
	elapsed                                       time.Duration
}

var (
	tablesMu sync.Mutex
	tables   []*tally
)

// runSeeds returns how many runs to make per mode (runs, -chaos.runs, or
// one replaying -chaos.seed), whether they replay, and run i's seed.
func runSeeds(runs int) (int, bool, func(i int) uint64) {
	replay := *seedFlag != 0
	switch {
	case replay:
		runs = 1
	case *runsFlag > 0:
		runs = *runsFlag
	}
	base := rand.Uint64() >> 16
	return runs, replay, func(i int) uint64 {
		if replay {
			return *seedFlag
		}
		return base + uint64(i)
	}
}

// runScenario runs sc's runs in both modes and asserts: no fenced run
// violates an invariant; the fenced runs are conclusive (each injected a
// fault and saw a stale rejection, and porcupine decided), but for a few
// (chaos.MaxInconclusive), which are run again; and each invariant that
// sc.control names is violated by a clear majority of the unfenced runs
// (the negative control: the checks can fail, and fail for the reason
// the scenario exists).
func runScenario(t *testing.T, sc scenario) {
	if f := (&chaos.Control{Want: sc.control}).Failures(); f != nil {
		t.Fatalf("%s: %s", sc.name, strings.Join(f, "; "))
	}
	w := sc.setup(t)
	if t.Failed() {
		return
	}
	runs, replay, seed := runSeeds(sc.shortRuns)

	// Fenced: every run must hold every invariant; runs until runs of
	// them were conclusive, or too many were not.
	tl := newTally(sc, "fenced")
	allowed := chaos.MaxInconclusive(runs)
	why := map[string]int{}
	for i, conclusive := 0, 0; conclusive < runs; i++ {
		rep, r := oneRun(t, w, seed(i), true)
		if rep == nil {
			return // the deployment broke; already reported
		}
		inc := append(rep.Inconclusive(r.faults), r.notes...)
		tl.add(rep, r, inc)
		logRun(t, sc, "fenced", i, seed(i), rep, r, inc)
		if rep.Violated() {
			t.Errorf("%s fenced run seed=%d violated %v, want none:\n\t%s\nreplay: go test -run '^%s$' -chaos.seed=%d",
				sc.name, seed(i), rep.Violations, strings.Join(rep.Details, "\n\t"), t.Name(), seed(i))
		}
		if len(inc) == 0 || replay {
			conclusive++
			continue
		}
		for _, reason := range inc {
			why[reason]++
		}
		if tl.inconclusive > allowed {
			t.Errorf("%s/%s fenced: %d inconclusive runs (%s) besides %d conclusive, want at most %d: the fault did not happen or did not reach the resource",
				sc.name, sc.adapter, tl.inconclusive, countsOf(why), conclusive, allowed)
			break
		}
	}
	tl.done()
	summary(t, "%s/%s fenced: %d runs, %d inconclusive (at most %d allowed)%s; faults=%d stale=%d (in the resource's journal %d) violating=%d",
		sc.name, sc.adapter, tl.runs, tl.inconclusive, allowed, ifAny(": ", countsOf(why)), tl.faults, tl.stale, tl.resourceStale, tl.violating)

	// Unfenced: the negative control.
	tl = newTally(sc, "unfenced")
	ctl := &chaos.Control{Want: sc.control}
	for i := 0; moreControlRuns(i, runs, replay, ctl); i++ {
		rep, r := oneRun(t, w, seed(i), false)
		if rep == nil {
			return
		}
		tl.add(rep, r, nil)
		ctl.Add(rep)
		logRun(t, sc, "unfenced", i, seed(i), rep, r, nil)
	}
	tl.done()
	summary(t, "%s/%s unfenced control (* wanted in ≥ %d%%): %s", sc.name, sc.adapter, chaos.ControlShare, ctl)
	if !replay {
		for _, f := range ctl.Failures() {
			t.Errorf("%s/%s unfenced: %s (the checks must be able to fail, for the reason the scenario exists)", sc.name, sc.adapter, f)
		}
	}
}

// moreControlRuns reports whether a negative control that has made i
// runs makes another: always while i < runs; in a short test (no
// -chaos.runs, no -chaos.seed) also while it does not hold, up to
// chaos.ControlRuns(runs).
func moreControlRuns(i, runs int, replay bool, ctl *chaos.Control) bool {
	if i < runs {
		return true
	}
	return !replay && *runsFlag == 0 && i < chaos.ControlRuns(runs) && ctl.Failures() != nil
}

// logRun logs one run's line (and prints it in long mode).
func logRun(t *testing.T, sc scenario, mode string, i int, seed uint64, rep *chaos.Report, r *run, inconclusive []string) {
	t.Helper()
	line := fmt.Sprintf("%s %s run %d seed=%d: faults=%d ops=%d accepted=%d stale=%d resource-stale=%d unknown=%d violations=%v",
		sc.name, mode, i, seed, r.faults, rep.Ops, rep.Accepted, rep.Stale, rep.ResourceStale, rep.Unknown, rep.Violations)
	if len(inconclusive) > 0 {
		line += " INCONCLUSIVE: " + strings.Join(inconclusive, "; ")
	}
	t.Log(line)
	if *runsFlag > 0 {
		fmt.Println(line)
	}
}

// summary logs a scenario's summary of one mode (and prints it in long
// mode).
func summary(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	if *runsFlag > 0 {
		fmt.Println(line)
	}
}

// countsOf formats reasons and their counts, sorted.
func countsOf(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func ifAny(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

func newTally(sc scenario, mode string) *tally {
	return &tally{scenario: sc.name, adapter: sc.adapter, mode: mode, byInvariant: map[string]int{}, start: time.Now()}
}

// add counts one run.
func (tl *tally) add(rep *chaos.Report, r *run, inconclusive []string) {
	tl.runs++
	tl.faults += r.faults
	tl.ops += rep.Ops
	tl.accepted += rep.Accepted
	tl.stale += rep.Stale
	tl.resourceStale += rep.ResourceStale
	if len(rep.TimedOut) > 0 {
		tl.timeouts++
	}
	if len(inconclusive) > 0 {
		tl.inconclusive++
	}
	if rep.Violated() {
		tl.violating++
		for inv, n := range rep.Violations {
			tl.byInvariant[inv] += n
		}
	}
}

// done adds the tally to the long mode's table.
func (tl *tally) done() {
	tl.elapsed = time.Since(tl.start)
	tablesMu.Lock()
	tables = append(tables, tl)
	tablesMu.Unlock()
}

// oneRun runs holders against the resource while the nemesis injects
// faults, then checks the history.
func oneRun(t *testing.T, w *world, seed uint64, fenced bool) (*chaos.Report, *run) {
	t.Helper()
	r := &run{
		t:      t,
		w:      w,
		seed:   seed,
		fenced: fenced,
		name:   fmt.Sprintf("chaos-%d-%t", seed, fenced),
		rand:   rand.New(rand.NewPCG(seed, 0)),
		rec:    &chaos.Recorder{},
		reads:  make(chan readEvent),

		nemesisDone: make(chan struct{}),
		started:     make(chan struct{}),
	}
	if !w.starts {
		close(r.started)
	}
	defer func() {
		for _, f := range slices.Backward(r.cleanups) {
			f()
		}
	}()
	r.j, r.view = w.resource(r)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.holders(r, stop)
	}()
	stopHolders := sync.OnceFunc(func() {
		close(stop)
		<-done
	})
	defer stopHolders() // also when the nemesis fails the test
	func() {
		defer close(r.nemesisDone) // before stopHolders: holders may wait on it
		w.nemesis(r)
	}()
	stopHolders()
	if w.settle != nil {
		w.settle(t)
	}
	h := r.rec.History()
	if ops := r.j.Ops(); len(ops) > 0 {
		h.Resource = ops
	}
	if w.landed != nil {
		ops, err := w.landed(r, h.Ops)
		if err != nil {
			t.Errorf("the resource's journal: %v", err)
		}
		h.Resource = ops
	}
	h.Permits = w.permits
	h.Final = map[string]chaos.Final{}
	for _, res := range records(h) {
		v, f, err := r.j.Load(context.Background(), res)
		if err != nil {
			t.Errorf("Load(%q) error = %v", res, err)
			return nil, r
		}
		h.Final[res] = chaos.Final{Value: string(v), Present: v != nil, Fence: f}
	}
	rep := chaos.Check(h, checkBound)
	if rep.Violated() && (fenced || *keepFlag != "") {
		keep(t, r, h, rep)
	}
	return rep, r
}

// records returns the resources whose final state a run checks: Counter
// and Note, and every record the holders used (a semaphore's slots').
func records(h chaos.History) []string {
	seen := map[string]bool{chaos.Counter: true, chaos.Note: true}
	for _, op := range h.Ops {
		seen[op.Input.Resource] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// keep writes a violating run's history (JSON) and porcupine's
// visualization, and logs where.
func keep(t *testing.T, r *run, h chaos.History, rep *chaos.Report) {
	dir := *keepFlag
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "chaos-"); err != nil {
			t.Errorf("keep: %v", err)
			return
		}
	}
	base := filepath.Join(dir, fmt.Sprintf("%s-%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), map[bool]string{true: "fenced", false: "unfenced"}[r.fenced], r.seed))
	if err := h.WriteJSON(base + ".json"); err != nil {
		t.Errorf("keep: %v", err)
	}
	if rep.Info != nil {
		if err := porcupine.VisualizePath(chaos.FencedRegister, *rep.Info, base+".html"); err != nil {
			t.Errorf("keep: %v", err)
		}
	}
	t.Logf("wrote history to %s.json and visualization to %s.html", base, base)
}

// goroutineHolders runs holderCount holders in this process.
func goroutineHolders(r *run, stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range holderCount {
		h := &chaos.Holder{
			ID:        i,
			Lock:      r.w.lock(i),
			Name:      r.name,
			Store:     r.view(i),
			Rec:       r.rec,
			Rand:      rand.New(rand.NewPCG(r.seed, uint64(i)+1)),
			TTL:       ttl,
			OpTimeout: opTimeout,
			AfterRead: r.afterRead,
			Permits:   r.w.permits,
		}
		wg.Go(func() { h.Run(ctx) })
	}
	<-stop
	cancel()
	wg.Wait()
}

// memoryResource is fence.Memory (or, unfenced, chaos.Plain) in this
// process, journaled.
func memoryResource(r *run) (*chaos.Journal, func(int) fence.Store) {
	j := &chaos.Journal{Store: &fence.Memory{}}
	if !r.fenced {
		j.Store = &chaos.Plain{}
	}
	return j, func(int) fence.Store { return j }
}

// httpResource serves each run's resource (chaos.HTTPResource:
// httpfence.Middleware in front of the resource's handler) on one
// loopback server; with proxied, every holder reaches it through its own
// proxy (for delayed requests). Requests go to the resource of the run
// whose lock name their fence carries: a request delayed past the end of
// its run must not land in the next one.
type httpResource struct {
	srv     *httptest.Server
	mu      sync.Mutex
	run     map[string]*chaos.HTTPResource
	proxies []*redistest.Proxy
	// clients[fenced][i] is holder i's client.
	clients map[bool][]*http.Client
	urls    []string
	// prepare, if set, is applied to each run's journal before the run's
	// requests can reach it.
	prepare func(r *run, j *chaos.Journal)
	// stall, if set, is each run's chaos.HTTPResource.Stall.
	stall func(r *run, client int) <-chan struct{}
}

func newHTTPResource(t *testing.T, proxied bool) *httpResource {
	hr := &httpResource{run: map[string]*chaos.HTTPResource{}, clients: map[bool][]*http.Client{}}
	hr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		name, ok := chaos.RunOf(req)
		hr.mu.Lock()
		res := hr.run[name]
		hr.mu.Unlock()
		if !ok || res == nil {
			http.Error(w, "no such run", http.StatusNotFound)
			return
		}
		res.ServeHTTP(w, req)
	}))
	t.Cleanup(hr.srv.Close)
	for range holderCount {
		addr := strings.TrimPrefix(hr.srv.URL, "http://")
		if proxied {
			p := redistest.NewProxy(t, addr)
			hr.proxies = append(hr.proxies, p)
			addr = p.Addr()
		}
		for _, fenced := range []bool{true, false} {
			c := chaos.NewHTTPClient(fenced)
			t.Cleanup(c.CloseIdleConnections)
			hr.clients[fenced] = append(hr.clients[fenced], c)
		}
		hr.urls = append(hr.urls, "http://"+addr)
	}
	return hr
}

// resource makes r's resource, serves it for r's requests, and returns
// its journal and each holder's view.
func (hr *httpResource) resource(r *run) (*chaos.Journal, func(int) fence.Store) {
	res := chaos.NewHTTPResource(r.fenced)
	if hr.prepare != nil {
		hr.prepare(r, res.Journal)
	}
	if hr.stall != nil {
		res.Stall = func(client int) <-chan struct{} { return hr.stall(r, client) }
	}
	hr.mu.Lock()
	hr.run[r.name] = res
	hr.mu.Unlock()
	return res.Journal, func(i int) fence.Store { return &chaos.HTTPStore{URL: hr.urls[i], Client: hr.clients[r.fenced][i]} }
}

func lockOptions() *fencelock.Options {
	return &fencelock.Options{TTL: ttl, RetryInterval: 10 * time.Millisecond}
}

// redisOptions are go-redis options for a lock connection that notices
// faults within the TTL's order of magnitude.
func redisOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		DialTimeout:           10 * ttl,
		ReadTimeout:           10 * ttl,
		WriteTimeout:          10 * ttl,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		PoolSize:              4,
	}
}

// fault is a fault the targeted nemesis aims at a holder that has just
// read the counter.
type fault struct {
	// longOnly aims only at holders about to compute for longer than
	// the TTL: a fault that ends a lease matters only to a holder still
	// working when a newer holder writes.
	longOnly bool
	// shortOnly aims only at holders about to write within the TTL.
	shortOnly bool
	// stall keeps the victim waiting before its write until the fault
	// is healed.
	stall bool
	// hold returns how long the fault lasts.
	hold func(r *rand.Rand) time.Duration
	// inject and heal run in the test goroutine.
	inject func(t *testing.T, victim int)
	heal   func(t *testing.T, victim int)
}

// between returns a random duration in [lo, hi) TTLs.
func between(r *rand.Rand, lo, hi float64) time.Duration {
	return time.Duration((lo + r.Float64()*(hi-lo)) * float64(ttl))
}

// targeted is the nemesis of most scenarios: for runFor, it aims f at a
// holder that has just read the counter (with probability 3/4, one
// fault at a time), heals it after f.hold, and heals everything at the
// end.
func targeted(f fault) func(r *run) {
	return func(r *run) {
		skip := func(ev readEvent) bool {
			return (f.longOnly && ev.compute < ttl) || (f.shortOnly && ev.compute >= ttl)
		}
		aimAtReads(r, skip, func(ev readEvent) (<-chan struct{}, time.Duration, func()) {
			victim := ev.client
			var stall chan struct{}
			if f.stall {
				stall = make(chan struct{})
			}
			f.inject(r.t, victim)
			r.faults++
			// f.hold after f.inject: TestQuorumNodeLoss's hold picks the
			// node its heal and its next inject restart.
			hold := f.hold(r.rand)
			return stall, hold, func() {
				if f.heal != nil {
					f.heal(r.t, victim)
				}
				if stall != nil {
					close(stall)
				}
			}
		})
	}
}

// aimAtReads is the loop of the nemeses that aim one fault at a time at a
// holder that has just read the counter. For runFor, while no fault is in
// force, it hands aim each read that skip (nil: none) lets through, with
// probability 3/4, and answers the read with the stall aim returns (nil:
// none); aim's fault is then in force for its hold, after which its heal
// (nil: nothing to undo) runs. A zero hold puts nothing in force: its
// heal runs at once, so that a stall is never left shut. What is in force
// at the end is healed. The other reads are answered at once.
// Timers decide when faults end (and world.healWhen, if set); nothing
// asserts on timing. runFor counts from when the holders have started.
func aimAtReads(r *run, skip func(readEvent) bool, aim func(readEvent) (stall <-chan struct{}, hold time.Duration, heal func())) {
	<-r.started
	end := time.NewTimer(runFor)
	defer end.Stop()
	var (
		healC <-chan struct{}
		heal  func()
	)
	healNow := func() {
		if heal != nil {
			heal()
		}
		heal, healC = nil, nil
	}
	defer healNow()
	for {
		select {
		case <-end.C:
			return
		case <-healC:
			healNow()
		case ev := <-r.reads:
			// The draw comes last, only for reads that may be faulted: a
			// seed recorded before replays the same faults.
			if healC != nil || (skip != nil && skip(ev)) || r.rand.IntN(4) == 0 {
				ev.reply <- nil
				continue
			}
			aimed := time.Now()
			stall, hold, h := aim(ev)
			ev.reply <- stall
			switch {
			case hold > 0:
				heal, healC = h, healAfter(r, aimed, hold)
			case h != nil:
				h()
			}
		}
	}
}

// healAfter returns a channel closed once hold has passed and, if the
// world says so, once what its healWhen waits for has happened.
func healAfter(r *run, aimed time.Time, hold time.Duration) <-chan struct{} {
	c := make(chan struct{})
	var when <-chan struct{}
	if r.w.healWhen != nil {
		when = r.w.healWhen(r, aimed)
	}
	go func() {
		<-time.After(hold)
		if when != nil {
			<-when
		}
		close(c)
	}()
	return c
}

// standalone is a world with one lock Redis that every holder reaches
// through its own proxy, and a resource in this process.
type standalone struct {
	srv     *redistest.Server
	proxies []*redistest.Proxy
	clients []*fencelock.Client
}

func newStandalone(t *testing.T) *standalone { return standaloneOn(t, redistest.New(t)) }

// standaloneOn is the standalone world of lock Redis srv.
func standaloneOn(t *testing.T, srv *redistest.Server) *standalone {
	s := &standalone{srv: srv}
	for range holderCount {
		p := redistest.NewProxy(t, s.srv.Addr())
		rdb := redis.NewClient(redisOptions(p.Addr()))
		t.Cleanup(func() { rdb.Close() })
		s.proxies = append(s.proxies, p)
		s.clients = append(s.clients, lockClient(t, rdb))
	}
	return s
}

func (s *standalone) world(res func(*run) (*chaos.Journal, func(int) fence.Store), f fault) *world {
	return &world{
		lock:     func(i int) *fencelock.Client { return s.clients[i] },
		resource: res,
		holders:  goroutineHolders,
		nemesis:  targeted(f),
	}
}

func printTable(out *os.File) {
	tablesMu.Lock()
	defer tablesMu.Unlock()
	slices.SortStableFunc(tables, func(a, b *tally) int { return strings.Compare(a.scenario, b.scenario) })
	fmt.Fprintf(out, "\n%-22s %-9s %-9s %5s %7s %8s %9s %8s %8s %10s %12s %8s  %s\n",
		"scenario", "adapter", "mode", "runs", "faults", "ops", "accepted", "stale", "res-stale", "violating", "inconclusive", "time", "violations by invariant")
	for _, tl := range tables {
		var inv []string
		for _, k := range chaos.Invariants {
			if n := tl.byInvariant[k]; n > 0 {
				inv = append(inv, fmt.Sprintf("%s=%d", k, n))
			}
		}
		if tl.timeouts > 0 {
			inv = append(inv, fmt.Sprintf("(porcupine timeouts: %d)", tl.timeouts))
		}
		fmt.Fprintf(out, "%-22s %-9s %-9s %5d %7d %8d %9d %8d %8d %10d %12d %8s  %s\n",
			tl.scenario, tl.adapter, tl.mode, tl.runs, tl.faults, tl.ops, tl.accepted, tl.stale, tl.resourceStale, tl.violating,
			tl.inconclusive, tl.elapsed.Round(time.Second), strings.Join(inv, " "))
	}
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
