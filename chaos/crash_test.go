package chaos_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock/chaos"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// orphanSlack is how long past its TTL a dead holder's lock may still be
// seen: a renewal sent just before the kill may reach the server after
// it, later still on a loaded machine, whose servers wait for a core.
// An orphan (a lock renewed after its holder died) would be seen for the
// rest of the run, several times this.
const orphanSlack = 2 * ttl

// TestHolderCrash runs the holders as processes and kills one with
// SIGKILL, as a crash or the OOM killer would, then starts a replacement
// (a new client ID). Half the kills hit the holder that has just read the
// counter, before the reply reaches it (mid-hold: its lease is held and
// renewed until then); the other half hit another live holder, which is
// waiting in Acquire (mid-acquire: its request may have taken the lock).
// Every other fault is a SIGSTOP pause of the reader for 2–4 TTLs
// instead, as in TestHolderProcessPause: a killed holder never writes
// again, so only a paused one gives the unfenced control stale writes.
//
// Besides the usual invariants, no lock may outlive its holder: the lock
// key is sampled all run long, and every owner value it held that no
// surviving holder acquired (a killed holder's lease or acquisition) must
// be gone within TTL + orphanSlack of a kill, or of its first sighting.
// Holders write each record as they make it (chaos.Recorder.Stream), so a
// killed holder leaves what it did; the calls it had in flight are taken
// from the resource's journal, with unknown results.
func TestHolderCrash(t *testing.T) {
	if os.Getenv(holderEnv) != "" {
		t.Skip("inside a holder process")
	}
	runScenario(t, scenario{name: "holder-crash", adapter: "http", shortRuns: 3, control: staleOrder, setup: func(t *testing.T) *world {
		srv := redistest.New(t)
		admin := srv.Client(t)
		hr := newHTTPResource(t, false)
		hr.prepare = func(r *run, j *chaos.Journal) {
			j.AfterRead = func(client int, f fence.Fence) { r.afterRead(client, f, 0) }
		}
		ph := &procHolders{lockAddr: srv.Addr(), hr: hr, dir: t.TempDir(), admin: admin}
		t.Cleanup(func() {
			line := fmt.Sprintf("holder-crash: longest a dead holder's lock was seen after its kill (or an unrecorded acquisition after its first sighting): %v (bound %v)", ph.worst, ttl+orphanSlack)
			t.Log(line)
			if *runsFlag > 0 {
				fmt.Println(line)
			}
		})
		return &world{
			resource: hr.resource,
			holders:  ph.run,
			nemesis:  ph.nemesis,
			starts:   true,
			healWhen: anotherWrite,
		}
	}})
}

// procHolders runs holder processes for one run at a time, kills and
// replaces them, and samples the lock key.
type procHolders struct {
	lockAddr string
	hr       *httpResource
	dir      string
	admin    *redis.Client

	mu     sync.Mutex
	r      *run
	until  int64
	procs  map[int]*holderProc // live, by client ID
	killed []*holderProc       // killed in this run
	kills  []int64             // when, wall clock ns
	next   int                 // the next client ID
	// worst is the longest a dead holder's lock was seen after its kill,
	// over the test.
	worst time.Duration
}

type holderProc struct {
	id       int
	killedAt int64 // wall clock ns; 0 if alive
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	out      string
	ready    chan struct{} // closed when it said "ready"
	done     chan struct{}
}

// spawn starts holder id (TestHolderProcess): it is told when the run
// ends once that is known (ph.until set); the caller holds ph.mu.
func (ph *procHolders) spawn(id int) {
	r := ph.r
	out := filepath.Join(ph.dir, fmt.Sprintf("%s-%d.json", r.name, id))
	cfg, _ := json.Marshal(holderConfig{ID: id, Lock: ph.lockAddr, URL: ph.hr.urls[id%holderCount], Name: r.name, Fenced: r.fenced, Seed: r.seed, Out: out})
	cmd := exec.Command(os.Args[0], "-test.run=^TestHolderProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), holderEnv+"="+string(cfg))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	var stdout io.ReadCloser
	if err == nil {
		stdout, err = cmd.StdoutPipe()
	}
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		r.t.Errorf("start holder %d: %v", id, err)
		return
	}
	p := &holderProc{id: id, cmd: cmd, stdin: stdin, out: out, ready: make(chan struct{}), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() && sc.Text() == "ready" {
			close(p.ready)
		}
		io.Copy(io.Discard, stdout) // to EOF, before Wait closes it
		cmd.Wait()
		close(p.done)
	}()
	if ph.until != 0 {
		ph.begin(p)
	}
	ph.procs[id] = p
}

// begin tells p when the run ends; the caller holds ph.mu. The pipe
// holds the line until p reads it.
func (ph *procHolders) begin(p *holderProc) {
	fmt.Fprintln(p.stdin, ph.until)
	p.stdin.Close()
}

// run is the world's holders: it starts holderCount processes and the
// sampler, then the run once every holder is ready; it waits for stop
// and every process, and merges the histories.
func (ph *procHolders) run(r *run, stop <-chan struct{}) {
	ph.mu.Lock()
	ph.r, ph.until, ph.procs, ph.killed, ph.kills, ph.next = r, 0, map[int]*holderProc{}, nil, nil, holderCount
	for i := range holderCount {
		ph.spawn(i)
	}
	first := maps.Clone(ph.procs)
	ph.mu.Unlock()
	for _, p := range first {
		select {
		case <-p.ready:
		case <-p.done:
			r.t.Errorf("holder %d ended before it was ready", p.id)
		case <-time.After(2 * time.Minute):
			r.t.Errorf("holder %d not ready within 2 minutes", p.id)
		}
	}
	ph.mu.Lock()
	ph.until = time.Now().Add(runFor).UnixNano()
	for _, p := range first {
		ph.begin(p)
	}
	ph.mu.Unlock()
	close(r.started)

	samples := make(chan []keySample, 1)
	sampling, stopSampling := context.WithCancel(context.Background())
	go func() { samples <- sampleLock(sampling, ph.admin, "fencelock:{"+r.name+"}") }()

	<-stop
	ph.mu.Lock()
	all := make([]*holderProc, 0, len(ph.procs))
	for _, p := range ph.procs {
		all = append(all, p)
	}
	ph.mu.Unlock()
	for _, p := range all {
		p.cmd.Process.Signal(syscall.SIGCONT)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
	}
	ph.mu.Lock()
	killed := ph.killed
	ph.mu.Unlock()
	all = append(all, killed...)
	known := map[string]*holderProc{} // lease ID → its holder
	var dead []chaos.History
	for _, p := range all {
		f, err := os.Open(p.out)
		if errors.Is(err, os.ErrNotExist) && slices.Contains(killed, p) {
			// Killed mid-acquire before it had opened its stream, which a
			// loaded machine makes likely for a replacement just started:
			// it recorded nothing, and the journal has what it sent.
			continue
		}
		var h chaos.History
		if err == nil {
			h, err = chaos.ReadStream(f)
			f.Close()
		}
		if err != nil {
			r.t.Errorf("holder %d history %s: %v", p.id, p.out, err)
			continue
		}
		r.rec.Merge(h)
		for _, a := range h.Leases {
			known[a.Lease] = p
		}
		if slices.Contains(killed, p) {
			dead = append(dead, h)
		}
	}
	// A dead holder's lock outlives the processes by up to a TTL: keep
	// sampling that long.
	<-time.After(ttl + orphanSlack)
	stopSampling()
	ph.checkOrphans(r, <-samples, known)
	addInFlight(r, killed, dead)
}

// addInFlight adds the calls the killed holders had in flight when they
// died, which the resource's journal has and their streams do not, with
// unknown results: they never learnt them.
func addInFlight(r *run, killed []*holderProc, streams []chaos.History) {
	dead := map[int]bool{}
	for _, p := range killed {
		dead[p.id] = true
	}
	recorded := map[int64]bool{}
	for _, h := range streams {
		for _, op := range h.Ops {
			recorded[op.ID] = true
		}
	}
	var ops []chaos.Op
	for _, op := range r.j.Ops() {
		if dead[op.Client] && !recorded[op.ID] {
			op.Output, op.Err = chaos.Output{Result: chaos.ResultUnknown}, "holder killed"
			ops = append(ops, op)
		}
	}
	r.rec.Merge(chaos.History{Ops: ops})
}

// nemesis aims a fault at a holder that has just read the counter (with
// probability 3/4, one at a time): a kill of it or of another holder, or
// a pause of it. A kill's replacement starts at once; a pause is healed
// after 2–4 TTLs, a kill's cool-down is 2 TTLs.
func (ph *procHolders) nemesis(r *run) {
	aimAtReads(r, nil, func(ev readEvent) (<-chan struct{}, time.Duration, func()) {
		r.faults++
		ph.mu.Lock()
		defer ph.mu.Unlock()
		reader := ph.procs[ev.client]
		switch kind := r.faults % 4; {
		case reader == nil:
			return nil, 0, nil
		case kind == 1 || kind == 3: // a pause
			if err := reader.cmd.Process.Signal(syscall.SIGSTOP); err != nil && !errors.Is(err, os.ErrProcessDone) {
				r.t.Errorf("SIGSTOP holder %d: %v", ev.client, err)
			}
			return nil, between(r.rand, 2, 4), func() { reader.cmd.Process.Signal(syscall.SIGCONT) }
		default: // a kill: mid-hold (the reader) or mid-acquire (another)
			victim := reader
			if kind == 2 {
				for id, p := range ph.procs {
					if id != ev.client {
						victim = p
						break
					}
				}
			}
			ph.kill(victim)
			return nil, 2 * ttl, nil
		}
	})
}

// kill kills p with SIGKILL and starts its replacement; the caller holds
// ph.mu.
func (ph *procHolders) kill(p *holderProc) {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		ph.r.t.Errorf("SIGKILL holder %d: %v", p.id, err)
		return
	}
	<-p.done
	p.killedAt = time.Now().UnixNano()
	ph.kills = append(ph.kills, p.killedAt)
	ph.killed = append(ph.killed, p)
	delete(ph.procs, p.id)
	ph.spawn(ph.next)
	ph.next++
}

// keySample is one reading of the lock key.
type keySample struct {
	sent, recv int64 // wall clock, ns
	owner      string
	present    bool
}

// sampleLock reads key every millisecond until ctx ends.
func sampleLock(ctx context.Context, admin *redis.Client, key string) []keySample {
	var out []keySample
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		s := keySample{sent: time.Now().UnixNano()}
		v, err := admin.Get(ctx, key).Result()
		s.recv = time.Now().UnixNano()
		switch {
		case err == nil:
			s.owner, s.present = v, true
			out = append(out, s)
		case errors.Is(err, redis.Nil):
			out = append(out, s)
		}
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
	}
}

// checkOrphans checks that no owner value the lock key held outlived its
// holder. A killed holder's lease must be gone within TTL + orphanSlack
// of the kill; an owner whose lease nobody recorded (an acquisition in
// flight when its holder was killed, or one abandoned at the run's end)
// within that of a kill made after it was first seen, or of its first
// sighting. Surviving holders' leases may be renewed for as long as they
// like. At least one owner must be a recorded lease, or the lease IDs are
// not computed as the library does.
func (ph *procHolders) checkOrphans(r *run, samples []keySample, known map[string]*holderProc) {
	type seen struct{ first, last int64 } // first: recv of the first sample; last: sent of the last
	owners := map[string]*seen{}
	for _, s := range samples {
		if !s.present {
			continue
		}
		o := owners[s.owner]
		if o == nil {
			o = &seen{first: s.recv}
			owners[s.owner] = o
		}
		o.last = s.sent
	}
	ph.mu.Lock()
	kills := ph.kills
	ph.mu.Unlock()
	bound := int64(ttl + orphanSlack)
	matched := 0
	for owner, o := range owners {
		var ok bool
		var after int64 // how long it was seen after its holder's end
		var rel []time.Duration
		if p, rec := known[leaseIDOf(owner)]; rec {
			matched++
			if p.killedAt == 0 {
				continue // a survivor's
			}
			after = o.last - p.killedAt
			ok = after <= bound
			rel = []time.Duration{time.Duration(p.killedAt - o.first)}
		} else {
			after = o.last - o.first
			ok = after <= bound
			for _, k := range kills {
				rel = append(rel, time.Duration(k-o.first))
				if k >= o.first-int64(ttl) && k <= o.last+int64(orphanSlack) {
					after = min(after, o.last-k)
					ok = ok || o.last <= k+bound
				}
			}
		}
		ph.mu.Lock()
		ph.worst = max(ph.worst, time.Duration(after))
		ph.mu.Unlock()
		if !ok {
			r.t.Errorf("holder-crash: the lock was held by lease %s (recorded by its holder: %t) for %v after its first sighting, %v after its holder's end (kills at %v after its first sighting), want at most %v: an orphaned lock",
				leaseIDOf(owner), known[leaseIDOf(owner)] != nil, time.Duration(o.last-o.first), time.Duration(after), rel, time.Duration(bound))
		}
	}
	if len(owners) > 0 && matched == 0 {
		r.t.Errorf("holder-crash: none of the %d owners the lock key held maps to a recorded lease ID: leaseIDOf no longer matches fencelock's leaseID (lockref.go)", len(owners))
	}
}

// leaseIDOf is fencelock's lease ID of an owner value (leaseID, lockref.go): the
// sampler sees owner values, the holders record lease IDs.
func leaseIDOf(owner string) string {
	sum := sha256.Sum256([]byte("fencelock lease id\x00" + owner))
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

// anotherWrite is the holder-crash world's healWhen: a channel closed once
// the resource has accepted a write called after aimed (by a holder other
// than the paused or killed one, which cannot call), or after 40 TTLs. A
// paused holder is thus continued only once a newer holder has written,
// however slowly a loaded machine lets the others acquire: its own write
// is then stale, and the fenced run conclusive.
func anotherWrite(r *run, aimed time.Time) <-chan struct{} {
	c := make(chan struct{})
	go func() {
		defer close(c)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for giveUp := time.After(40 * ttl); ; {
			for _, op := range r.j.Ops() {
				if op.Input.Op == chaos.OpPut && op.Output.Result == chaos.ResultOK && op.Call >= aimed.UnixNano() {
					return
				}
			}
			select {
			case <-giveUp:
				return
			case <-tick.C:
			}
		}
	}()
	return c
}
