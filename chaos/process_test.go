package chaos_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/chaos"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// holderEnv names the environment variable that turns the test binary
// into a holder process (TestHolderProcess) and carries its config.
const holderEnv = "CHAOS_HOLDER"

type holderConfig struct {
	ID     int
	Lock   string // the lock Redis's address
	URL    string // the HTTP resource
	Name   string // the lock name
	Fenced bool   // send fences (httpfence.Transport)
	Seed   uint64
	Until  int64  // wall clock, ns: stop starting cycles
	Out    string // where to write the History
	// Stream makes the holder write each record to Out as it is made
	// (chaos.Recorder.Stream) rather than the History at the end, for
	// holders that may be killed.
	Stream bool
}

// TestHolderProcess is not a test: it is the body of a holder process
// that TestHolderProcessPause starts by re-executing the test binary.
func TestHolderProcess(t *testing.T) {
	raw := os.Getenv(holderEnv)
	if raw == "" {
		t.Skip("runs only as a holder process started by TestHolderProcessPause")
	}
	var c holderConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatalf("%s: %v", holderEnv, err)
	}
	rdb := redis.NewClient(redisOptions(c.Lock))
	defer rdb.Close()
	rec := &chaos.Recorder{}
	if c.Stream {
		f, err := os.OpenFile(c.Out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		rec.Stream = f
	}
	h := &chaos.Holder{
		ID:        c.ID,
		Lock:      fencelock.New(rdb, lockOptions()),
		Name:      c.Name,
		Store:     &chaos.HTTPStore{URL: c.URL, Client: chaos.NewHTTPClient(c.Fenced)},
		Rec:       rec,
		Rand:      rand.New(rand.NewPCG(c.Seed, uint64(c.ID)+1)),
		TTL:       ttl,
		OpTimeout: opTimeout,
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, c.Until))
	defer cancel()
	h.Run(ctx)
	if c.Stream {
		return
	}
	if err := rec.History().WriteJSON(c.Out); err != nil {
		t.Fatal(err)
	}
}

// TestHolderProcessPause runs the holders as processes and stops one
// with SIGSTOP, past its TTL, right after the resource accepted its
// fenced read and before the reply reaches it: the whole process, its
// lease keeper included, is frozen, as in a long GC pause or a VM
// migration. When SIGCONT comes, a newer holder has written, and the
// paused holder goes on to write with its old fence. The resource is
// fence.Memory behind HTTP, in the test process, which records every
// operation as it decides it.
func TestHolderProcessPause(t *testing.T) {
	if os.Getenv(holderEnv) != "" {
		t.Skip("inside a holder process")
	}
	runScenario(t, scenario{name: "holder-process-pause", adapter: "http", shortRuns: 3, control: staleWrite, setup: func(t *testing.T) *world {
		srv := redistest.New(t)
		hr := newHTTPResource(t, false)
		hr.prepare = func(r *run, j *chaos.Journal) {
			j.AfterRead = func(client int, f fence.Fence) { r.afterRead(client, f, 0) }
		}
		var mu sync.Mutex
		procs := map[int]*os.Process{}
		signal := func(t *testing.T, v int, sig syscall.Signal) {
			mu.Lock()
			p := procs[v]
			mu.Unlock()
			if p == nil {
				return
			}
			if err := p.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
				t.Errorf("signal %v to holder %d: %v", sig, v, err)
			}
		}
		dir := t.TempDir()
		return &world{
			resource: hr.resource,
			holders: func(r *run, stop <-chan struct{}) {
				until := time.Now().Add(runFor).UnixNano()
				var cmds []*exec.Cmd
				var outs []string
				for i := range holderCount {
					out := filepath.Join(dir, fmt.Sprintf("%s-%d.json", r.name, i))
					cfg, _ := json.Marshal(holderConfig{ID: i, Lock: srv.Addr(), URL: hr.urls[i], Name: r.name, Fenced: r.fenced, Seed: r.seed, Until: until, Out: out})
					cmd := exec.Command(os.Args[0], "-test.run=^TestHolderProcess$", "-test.count=1")
					cmd.Env = append(os.Environ(), holderEnv+"="+string(cfg))
					cmd.Stderr = os.Stderr // stdout only says PASS
					if err := cmd.Start(); err != nil {
						r.t.Errorf("start holder %d: %v", i, err)
						continue
					}
					mu.Lock()
					procs[i] = cmd.Process
					mu.Unlock()
					cmds = append(cmds, cmd)
					outs = append(outs, out)
				}
				<-stop
				for _, cmd := range cmds {
					cmd.Process.Signal(syscall.SIGCONT)
					done := make(chan struct{})
					go func() {
						cmd.Wait()
						close(done)
					}()
					select {
					case <-done:
					case <-time.After(30 * time.Second):
						cmd.Process.Kill()
						<-done
					}
				}
				mu.Lock()
				clear(procs)
				mu.Unlock()
				for _, out := range outs {
					b, err := os.ReadFile(out)
					var h chaos.History
					if err == nil {
						err = json.Unmarshal(b, &h)
					}
					if err != nil {
						r.t.Errorf("holder history %s: %v", out, err)
						continue
					}
					r.rec.Merge(h)
				}
			},
			nemesis: targeted(fault{
				hold:   func(r *rand.Rand) time.Duration { return between(r, 2, 4) },
				inject: func(t *testing.T, v int) { signal(t, v, syscall.SIGSTOP) },
				heal:   func(t *testing.T, v int) { signal(t, v, syscall.SIGCONT) },
			}),
		}
	}})
}
