package chaos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock/chaos"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/redistest"
)

// The supervised scenario's timing. The CLI's TTL is longer than the
// library scenarios' ttl: each lease starts two processes (fencelock's
// guard and COMMAND), which must fit in a lease many times over on a
// loaded machine.
const (
	cliTTL = 400 * time.Millisecond
	// clockSlack is how late past the bound on the lease's deadline a
	// stopped supervisor's COMMAND may still send a request: the guard's
	// timer and SIGKILL on a loaded machine (19 ms late seen beside the
	// -race suites of a 2-core machine), and two processes' clock
	// readings. A guard that does nothing lets COMMAND write for the
	// whole stop, 2-3 TTLs: a quarter TTL still tells the two apart.
	clockSlack = cliTTL / 4
	// cliTail is how long the holders go on after the nemesis's runFor:
	// a supervisor stopped late in it leaves the next holder its lease
	// to wait out, a fencelock run and COMMAND (a -race test binary) to
	// start and a write to send, which a loaded machine (three servers'
	// suites at once on 2 cores) can stretch past the end of runFor.
	cliTail = 5 * cliTTL
)

// supervisedEnv turns the test binary into the COMMAND of fencelock run
// (TestSupervisedHolder) and carries its config.
const supervisedEnv = "CHAOS_SUPERVISED"

type supervisedConfig struct {
	ID     int
	URL    string
	Fenced bool
	Seed   uint64
	Until  int64 // wall clock, ns: stop starting cycles
	Out    string
	Called int64 // wall clock, ns: when fencelock run was started
}

// TestSupervisedHolder is not a test: it is the COMMAND that
// TestSupervisorStop has fencelock run start. It holds the lease it was
// given (FENCELOCK_FENCE) in cycles of read, compute, write until Until,
// never looking at its lease: only the guard can stop it.
func TestSupervisedHolder(t *testing.T) {
	raw := os.Getenv(supervisedEnv)
	if raw == "" {
		t.Skip("runs only as the COMMAND of fencelock run started by TestSupervisorStop")
	}
	var c supervisedConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatalf("%s: %v", supervisedEnv, err)
	}
	f, err := fence.Parse(os.Getenv("FENCELOCK_FENCE"))
	if err != nil {
		t.Fatalf("FENCELOCK_FENCE: %v", err)
	}
	token, err := strconv.ParseInt(os.Getenv("FENCELOCK_TOKEN"), 10, 64)
	if err != nil || token != f.Token {
		t.Fatalf("FENCELOCK_TOKEN = %q, want the fence's token %d (%v)", os.Getenv("FENCELOCK_TOKEN"), f.Token, err)
	}
	out, err := os.OpenFile(c.Out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	rec := &chaos.Recorder{Stream: out}
	rec.Lease(chaos.Acquisition{Client: c.ID, Token: f.Token, Lease: f.Lease, Call: c.Called, Return: time.Now().UnixNano()})
	h := &chaos.Holder{
		ID:        c.ID,
		Store:     &chaos.HTTPStore{URL: c.URL, Client: chaos.NewHTTPClient(c.Fenced)},
		Rec:       rec,
		Rand:      rand.New(rand.NewPCG(c.Seed, uint64(c.ID)+1)),
		TTL:       ttl, // sizes the computations: mostly short, a quarter ~5 ttl
		OpTimeout: cliTTL,
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, c.Until))
	defer cancel()
	for ctx.Err() == nil {
		h.Hold(ctx, f)
	}
}

// TestSupervisorStop runs every holder as `fencelock run --ttl 400ms
// NAME COMMAND`, COMMAND being a holder process that writes with the
// fence it was given until the run ends, and stops (SIGSTOP) the
// supervisor, fencelock, of a holder whose COMMAND has just read the
// counter, for 2–3 TTLs; COMMAND itself is not stopped. Nothing renews
// the lease meanwhile: the guard must kill COMMAND by the lease's
// deadline, which fencelock sent it after its last renewal, before the
// stop. The writes the stopped holder's COMMAND sends meanwhile are held
// on their way to the resource until a newer holder's write has reached
// it, so that one sent before the deadline lands after it, as a write
// still in the network when its process is killed does: the guard bounds
// what COMMAND does, the fence what it has sent.
//
// Besides the checker's invariants, checked in both modes: no request of
// the stopped holder's COMMAND leaves later than clockSlack past the stop
// plus the TTL, a bound on the lease's deadline (lateRequests).
func TestSupervisorStop(t *testing.T) {
	if os.Getenv(supervisedEnv) != "" {
		t.Skip("inside a supervised holder")
	}
	skipOnTransport(t, "its holders are fencelock CLI processes, which reach Redis through go-redis whatever the transport")
	runScenario(t, scenario{name: "supervisor-stop", adapter: "http", shortRuns: 2, control: lateRequest, setup: func(t *testing.T) *world {
		bin := buildFencelock(t)
		srv := redistest.New(t)
		hr := newHTTPResource(t, false)
		sv := &supervisors{bin: bin, lockURL: "redis://" + srv.Addr(), dir: t.TempDir(), delayed: map[int]bool{}, arrivals: map[int][]int64{}}
		sv.front = httptest.NewServer(http.HandlerFunc(sv.serve(hr.srv.Config.Handler)))
		t.Cleanup(sv.front.Close)
		hr.prepare = func(r *run, j *chaos.Journal) {
			j.AfterRead = func(client int, f fence.Fence) { r.afterRead(client, f, 0) }
		}
		t.Cleanup(func() {
			line := fmt.Sprintf("supervisor-stop: %d stops; latest request of a stopped supervisor's COMMAND: %v after the stop + TTL (bound %v; none after a stop: %t)", sv.stopsTotal, sv.worst, clockSlack, !sv.wrote)
			t.Log(line)
			if *runsFlag > 0 {
				fmt.Println(line)
			}
		})
		return &world{resource: hr.resource, holders: sv.run, nemesis: sv.nemesis}
	}})
}

// buildFencelock builds cmd/fencelock (the workspace resolves the
// modules) and returns the binary's path.
func buildFencelock(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "fencelock")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/fencelock")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ../cmd/fencelock: %v\n%s", err, out)
	}
	return bin
}

// supervisors runs holderCount slots, each starting fencelock run after
// fencelock run until the run ends, and stops them for the nemesis.
type supervisors struct {
	bin, lockURL string
	dir          string
	// front is the holders' way to the resource: it holds the writes of
	// the clients in delayed until another client's write has reached
	// the resource (landed), or the run's holders are done (ended).
	front    *httptest.Server
	inFlight sync.WaitGroup // held writes
	// arrivals has, by client ID, when COMMAND sent each of its requests
	// (wall clock, ns, from chaos.SentHeader).
	arrivals map[int][]int64

	mu      sync.Mutex
	r       *run
	cur     map[int]*exec.Cmd // by slot: the fencelock running
	gen     int               // COMMANDs started in this run: each gets a new client ID
	stops   []stopped         // in this run
	delayed map[int]bool      // by client ID
	// landed is closed, and replaced, each time a write that was not
	// held has been answered by the resource; ended once the run's
	// holders are done.
	landed *answered
	ended  chan struct{}
	// Over the test: how many stops, and the latest write of a stopped
	// supervisor's COMMAND relative to the stop + TTL (if any wrote).
	stopsTotal int
	worst      time.Duration
	wrote      bool
}

// stopped is one stopped supervisor: its COMMAND's client ID, when the
// supervisor was seen stopped and when it was continued (wall clock, ns).
type stopped struct {
	client int
	at     int64
	cont   int64
}

// An answered is one write answered by the resource, of client by; ch is
// closed once it has been.
type answered struct {
	ch chan struct{}
	by int
}

// serve passes requests on to the resource. A write of a delayed client
// is held until a write of another client has been answered (a newer
// holder's: nobody else holds the lock after the stop), so that it lands
// after it however slowly the newer holder's process starts; it is in the
// network meanwhile, so its client giving up does not cancel it. A held
// write that no other client's follows is lost in the network: were it
// to land after its own client's later writes (a stop healed before the
// lease lapsed, which the client outlives; or no newer holder before the
// end), it would reorder writes of one lease, which no fence can tell
// apart, and that is not this scenario's fault.
func (sv *supervisors) serve(next http.Handler) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, req *http.Request) {
		at, err := strconv.ParseInt(req.Header.Get(chaos.SentHeader), 10, 64)
		if err != nil {
			http.Error(w, chaos.SentHeader+": "+err.Error(), http.StatusBadRequest)
			return
		}
		var client int
		var id int64
		if _, err := fmt.Sscanf(req.Header.Get("Chaos-Op"), "%d/%d", &client, &id); err != nil {
			next.ServeHTTP(w, req)
			return
		}
		write := req.URL.Path == "/put"
		sv.mu.Lock()
		sv.arrivals[client] = append(sv.arrivals[client], at)
		delay := sv.delayed[client] && write
		l, ended := sv.landed, sv.ended
		if delay {
			sv.inFlight.Add(1)
		}
		sv.mu.Unlock()
		if delay {
			defer sv.inFlight.Done()
			req = req.WithContext(context.WithoutCancel(req.Context()))
			for {
				select {
				case <-l.ch:
				case <-ended:
					http.Error(w, "lost in the network", http.StatusServiceUnavailable)
					return
				}
				if l.by != client {
					break
				}
				sv.mu.Lock()
				l = sv.landed
				sv.mu.Unlock()
			}
		}
		next.ServeHTTP(w, req)
		if write && !delay {
			sv.mu.Lock()
			sv.landed.by = client
			close(sv.landed.ch)
			sv.landed = &answered{ch: make(chan struct{})}
			sv.mu.Unlock()
		}
	}
}

func (sv *supervisors) run(r *run, stop <-chan struct{}) {
	until := time.Now().Add(runFor + cliTail).UnixNano()
	sv.mu.Lock()
	sv.r, sv.cur, sv.gen, sv.stops = r, map[int]*exec.Cmd{}, 0, nil
	sv.landed, sv.ended = &answered{ch: make(chan struct{})}, make(chan struct{})
	clear(sv.delayed)
	clear(sv.arrivals)
	sv.mu.Unlock()
	var wg sync.WaitGroup
	var outs []string
	var outsMu sync.Mutex
	for slot := range holderCount {
		wg.Go(func() {
			for time.Now().UnixNano() < until {
				// No lease after the run's end: it would only start a
				// COMMAND with nothing to do.
				wait := time.Duration(until - time.Now().UnixNano()).Round(time.Millisecond)
				if wait <= 0 {
					break
				}
				sv.mu.Lock()
				id := slot + holderCount*sv.gen
				sv.gen++
				sv.mu.Unlock()
				out := filepath.Join(sv.dir, fmt.Sprintf("%s-%d.jsonl", r.name, id))
				outsMu.Lock()
				outs = append(outs, out)
				outsMu.Unlock()
				cfg, _ := json.Marshal(supervisedConfig{ID: id, URL: sv.front.URL, Fenced: r.fenced, Seed: r.seed + uint64(id), Until: until, Out: out, Called: time.Now().UnixNano()})
				cmd := exec.Command(sv.bin, "run", "--redis", sv.lockURL, "--ttl", cliTTL.String(), "--wait", wait.String(), r.name, "--",
					os.Args[0], "-test.run=^TestSupervisedHolder$", "-test.count=1")
				cmd.Env = append(os.Environ(), supervisedEnv+"="+string(cfg))
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Start(); err != nil {
					r.t.Errorf("start fencelock run: %v", err)
					return
				}
				sv.mu.Lock()
				sv.cur[slot] = cmd
				sv.mu.Unlock()
				err := waitBounded(cmd, 30*time.Second)
				sv.mu.Lock()
				delete(sv.cur, slot)
				sv.mu.Unlock()
				var ee *exec.ExitError
				switch {
				case err == nil:
				case errors.As(err, &ee) && (ee.ExitCode() == 124 || ee.ExitCode() == 75):
					// 124: the lease was lost (stopped, or late renewals on
					// a loaded machine) and COMMAND killed; 75: the wait ran out.
				default:
					r.t.Errorf("fencelock run (holder %d): %v\n%s", id, err, stderr.Bytes())
				}
			}
		})
	}
	<-stop
	wg.Wait()
	sv.mu.Lock()
	close(sv.ended) // no newer write will come: the held ones are lost
	sv.mu.Unlock()
	sv.inFlight.Wait()
	// The COMMANDs the guard killed left their last calls unrecorded; the
	// resource's journal has those that reached it, with unknown results.
	var all chaos.History
	for _, out := range outs {
		f, err := os.Open(out)
		if errors.Is(err, os.ErrNotExist) {
			continue // the lock was not had
		}
		var h chaos.History
		if err == nil {
			h, err = chaos.ReadStream(f)
			f.Close()
		}
		if err != nil {
			r.t.Errorf("holder history %s: %v", out, err)
			continue
		}
		all.Ops = append(all.Ops, h.Ops...)
		all.Leases = append(all.Leases, h.Leases...)
	}
	recorded := map[int64]bool{}
	for _, op := range all.Ops {
		recorded[op.ID] = true
	}
	for _, op := range r.j.Ops() {
		if !recorded[op.ID] {
			op.Output, op.Err = chaos.Output{Result: chaos.ResultUnknown}, "COMMAND killed"
			all.Ops = append(all.Ops, op)
		}
	}
	r.rec.Merge(all)
	sv.checkDeadlines(r)
}

// waitBounded waits for cmd, killing it after d.
func waitBounded(cmd *exec.Cmd, d time.Duration) error {
	t := time.AfterFunc(d, func() { cmd.Process.Kill() })
	defer t.Stop()
	return cmd.Wait()
}

// checkDeadlines checks the guard's promise for this run's stops (see
// lateRequests) and adds them to the test's figures.
func (sv *supervisors) checkDeadlines(r *run) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	sv.stopsTotal += len(sv.stops)
	latest, seen, late := lateRequests(sv.stops, sv.arrivals, cliTTL, clockSlack)
	if seen && (!sv.wrote || latest > sv.worst) {
		sv.worst, sv.wrote = latest, true
	}
	for _, l := range late {
		r.t.Errorf("supervisor-stop: %s: COMMAND outlived the lease", l)
	}
}

// lateRequests checks the guard's promise: no COMMAND of a stopped
// supervisor sends a request past its lease's deadline. The deadline
// fencelock gave the guard comes from its last renewal, sent before the
// stop: it is at most the stop + the TTL. A stop that ended before that
// bound promises nothing: the supervisor may have renewed the lease. A
// request is timed by COMMAND's own clock reading as it sent it. It
// returns the latest request after a stop relative to that bound (seen:
// there was one), and each request later than slack past it.
func lateRequests(stops []stopped, arrivals map[int][]int64, ttl, slack time.Duration) (latest time.Duration, seen bool, late []string) {
	for _, s := range stops {
		if s.cont < s.at+int64(ttl) {
			// Continued before its lease could end (the nemesis heals
			// everything at the end of runFor): it may have renewed the
			// lease, and COMMAND may go on with it.
			continue
		}
		bound := s.at + int64(ttl)
		for _, at := range arrivals[s.client] {
			if at < s.at {
				continue
			}
			if d := time.Duration(at - bound); !seen || d > latest {
				latest, seen = d, true
			}
			if at > bound+int64(slack) {
				late = append(late, fmt.Sprintf("holder %d sent a request %v after its supervisor's stop + TTL (%v after the stop), want at most %v",
					s.client, time.Duration(at-bound), time.Duration(at-s.at), slack))
			}
		}
	}
	return latest, seen, late
}

// The deadline check can fail: a request sent past a stop + TTL + slack
// is found, one within it is not, nor another client's, nor one after a
// stop that ended before the lease could.
func TestLateRequests(t *testing.T) {
	const ms = int64(time.Millisecond)
	stops := []stopped{{client: 4, at: 1000 * ms, cont: 2000 * ms}, {client: 5, at: 1000 * ms, cont: 1300 * ms}}
	for _, c := range []struct {
		name     string
		arrivals map[int][]int64
		late     int
		latest   time.Duration
	}{
		{"before the stop", map[int][]int64{4: {900 * ms}}, 0, 0},
		{"within the slack", map[int][]int64{4: {1200 * ms, 1405 * ms}}, 0, 5 * time.Millisecond},
		{"past it", map[int][]int64{4: {1200 * ms, 1411 * ms}}, 1, 11 * time.Millisecond},
		{"another client", map[int][]int64{1: {5000 * ms}}, 0, 0},
		{"continued before the lease could end", map[int][]int64{5: {1200 * ms, 3000 * ms}}, 0, 0},
	} {
		latest, _, late := lateRequests(stops, c.arrivals, 400*time.Millisecond, 10*time.Millisecond)
		if len(late) != c.late || latest != c.latest {
			t.Errorf("%s: lateRequests = %v, %q; want latest %v and %d late", c.name, latest, late, c.latest, c.late)
		}
	}
}

// nemesis stops the supervisor of a holder whose COMMAND has just read
// the counter (one at a time, with probability 3/4), holds the writes its
// COMMAND sends from then on (serve), and continues it 2–3 TTLs later.
func (sv *supervisors) nemesis(r *run) {
	aimAtReads(r, nil, func(ev readEvent) (<-chan struct{}, time.Duration, func()) {
		slot := ev.client % holderCount
		sv.mu.Lock()
		cmd := sv.cur[slot]
		sv.mu.Unlock()
		if cmd == nil {
			return nil, 0, nil
		}
		sv.setDelayed(ev.client, true)
		if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			sv.setDelayed(ev.client, false)
			if !errors.Is(err, os.ErrProcessDone) {
				r.t.Errorf("SIGSTOP fencelock of holder %d: %v", ev.client, err)
			}
			return nil, 0, nil
		}
		if !waitProcStopped(cmd.Process.Pid, 5*time.Second) {
			r.note("fencelock of holder %d not seen stopped", ev.client)
		}
		at := time.Now().UnixNano()
		sv.mu.Lock()
		sv.stops = append(sv.stops, stopped{client: ev.client, at: at})
		stop := len(sv.stops) - 1
		sv.mu.Unlock()
		r.faults++
		hold := time.Duration((2 + r.rand.Float64()) * float64(cliTTL))
		return nil, hold, func() {
			sv.mu.Lock()
			sv.stops[stop].cont = time.Now().UnixNano()
			sv.mu.Unlock()
			cmd.Process.Signal(syscall.SIGCONT)
			sv.setDelayed(ev.client, false)
		}
	})
}

func (sv *supervisors) setDelayed(client int, on bool) {
	sv.mu.Lock()
	sv.delayed[client] = on
	sv.mu.Unlock()
}

// waitProcStopped waits until pid's state is stopped ('T'), for at most d.
func waitProcStopped(pid int, d time.Duration) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		// The state follows the command name, in parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}
