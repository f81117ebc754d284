package chaos_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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
	Out    string // where it writes each record as it makes it (chaos.Recorder.Stream): it may be killed
}

// TestHolderProcess is not a test: it is the body of a holder process
// that procHolders (TestHolderProcessPause, TestHolderCrash) starts by
// re-executing the test binary. It says "ready" on stdout once it has
// reached the lock Redis, then reads from stdin when the run ends (a
// line, wall clock ns) and works until then: the run's time starts when
// its holders can work, not when a loaded machine gets round to starting
// them.
func TestHolderProcess(t *testing.T) {
	raw := os.Getenv(holderEnv)
	if raw == "" {
		t.Skip("runs only as a holder process started by TestHolderProcessPause or TestHolderCrash")
	}
	var c holderConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatalf("%s: %v", holderEnv, err)
	}
	rdb := redis.NewClient(redisOptions(c.Lock))
	defer rdb.Close()
	f, err := os.OpenFile(c.Out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec := &chaos.Recorder{Stream: f}
	rdb.Ping(context.Background()) // dials: a failure is the holder's to meet
	fmt.Println("ready")
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		return // the test ended before the run began
	}
	until, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		t.Fatalf("the run's end from stdin: %v", err)
	}
	h := &chaos.Holder{
		ID:        c.ID,
		Lock:      lockClient(t, rdb),
		Name:      c.Name,
		Store:     &chaos.HTTPStore{URL: c.URL, Client: chaos.NewHTTPClient(c.Fenced)},
		Rec:       rec,
		Rand:      rand.New(rand.NewPCG(c.Seed, uint64(c.ID)+1)),
		TTL:       ttl,
		OpTimeout: opTimeout,
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, until))
	defer cancel()
	h.Run(ctx)
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
		// The holder-crash world's processes, none of them killed.
		ph := &procHolders{lockAddr: srv.Addr(), hr: hr, dir: t.TempDir(), admin: srv.Client(t)}
		signal := func(t *testing.T, v int, sig syscall.Signal) {
			ph.mu.Lock()
			p := ph.procs[v]
			ph.mu.Unlock()
			if p == nil {
				return
			}
			if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
				t.Errorf("signal %v to holder %d: %v", sig, v, err)
			}
		}
		return &world{
			resource: hr.resource,
			holders:  ph.run,
			nemesis: targeted(fault{
				hold:   func(r *rand.Rand) time.Duration { return between(r, 2, 4) },
				inject: func(t *testing.T, v int) { signal(t, v, syscall.SIGSTOP) },
				heal:   func(t *testing.T, v int) { signal(t, v, syscall.SIGCONT) },
			}),
			starts:   true,
			healWhen: anotherWrite,
		}
	}})
}
