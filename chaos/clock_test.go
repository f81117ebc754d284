package chaos_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/chaos"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/redistest"
)

// newFakeTimeStandalone is newStandalone with the lock Redis under
// libfaketime, whose clock the nemesis steps (redistest.Server.SetClock).
// It skips on a redis-server that cannot run under libfaketime and fails
// if libfaketime is not installed.
func newFakeTimeStandalone(t *testing.T) *standalone {
	redistest.RequireFakeTime(t)
	return standaloneOn(t, redistest.Start(t, &redistest.Options{FakeTime: true}))
}

// TestClockJump steps the lock Redis's wall clock while a holder
// computes for longer than the TTL, to a new offset from real time
// between 0.2 and 5 s, forwards (two times in three) or back: a forward
// step expires the holder's lock at once (its renewal finds it gone,
// another holder takes the lock and writes, and the first writes last),
// a backward one makes locks last longer. The counter is kept throughout
// (the default TokenRetention), so FAILURE_MODEL.md promises increasing
// tokens whatever the clock does: tokens are max(counter + 1, clock).
func TestClockJump(t *testing.T) {
	runScenario(t, scenario{name: "clock-jump", adapter: "memory", shortRuns: 3, control: staleWrite, setup: func(t *testing.T) *world {
		s := newFakeTimeStandalone(t)
		var steps *rand.Rand // the run's clock steps, from its seed
		w := s.world(func(r *run) (*chaos.Journal, func(int) fence.Store) {
			steps = rand.New(rand.NewPCG(r.seed, 7))
			return memoryResource(r)
		}, fault{
			longOnly: true,
			hold:     func(r *rand.Rand) time.Duration { return between(r, 2, 4) },
			inject: func(t *testing.T, v int) {
				offset := time.Duration(200+steps.IntN(4800)) * time.Millisecond
				if steps.IntN(3) == 0 {
					offset = -offset
				}
				s.srv.SetClock(t, offset)
			},
		})
		w.settle = func(t *testing.T) { s.srv.SetClock(t, 0) }
		return w
	}})
}

// TestClockJumpWithinOutage is the safe side of the unsafe case: the
// lock Redis's clock runs 10 ms ahead, the server restarts without
// persistence while a holder computes (the counter is lost) and its clock
// is set right during an outage of at least 40 ms: a backward jump smaller
// than the outage, after which the clock floor is still above every token
// issued before. FAILURE_MODEL.md promises increasing tokens here.
func TestClockJumpWithinOutage(t *testing.T) {
	runScenario(t, scenario{name: "clock-jump-in-outage", adapter: "memory", shortRuns: 3, control: staleWrite, setup: func(t *testing.T) *world {
		s := newFakeTimeStandalone(t)
		const ahead, outage = 10 * time.Millisecond, 40 * time.Millisecond
		w := s.world(memoryResource, fault{
			longOnly: true,
			hold:     func(r *rand.Rand) time.Duration { return between(r, 2, 4) },
			inject: func(t *testing.T, v int) {
				s.srv.Kill(t) // no persistence: the counter is gone
				s.srv.SetClock(t, 0)
				<-time.After(outage) // the outage is the fault, not a wait for an event
				s.srv.Start(t)
			},
		})
		w.resource = func(r *run) (*chaos.Journal, func(int) fence.Store) {
			s.srv.SetClock(r.t, ahead) // in the test goroutine, before the holders start
			return memoryResource(r)
		}
		w.settle = func(t *testing.T) { s.srv.SetClock(t, 0) }
		return w
	}})
}

// clockAhead is how far ahead of real time the lock Redis's clock runs
// in TestClockJumpCounterLost before it is set right.
const clockAhead = 2 * time.Second

// TestClockJumpCounterLost is the one unsafe case FAILURE_MODEL.md
// documents, and the proof that the checker finds it: the lock Redis's
// clock runs clockAhead ahead of real time, so tokens (the clock floor)
// are too; then, while a holder computes, the server restarts without
// persistence (the counter is lost) and its clock is set right during
// the outage: a backward jump of 2 s, far larger than the outage. The
// next tokens come from the clock floor, below those issued before.
//
// Both modes must find it: at least 60% of the runs, fenced as unfenced,
// must violate issued-order (a later acquisition got a smaller token). The
// fenced resource keeps the greatest fence it saw, so it rejects the new
// holders rather than accepting writes out of order: the harm is a
// resource locked out until the clock catches up, and two leases that
// both believe they hold the lock.
func TestClockJumpCounterLost(t *testing.T) {
	s := newFakeTimeStandalone(t)
	w := s.world(memoryResource, fault{
		longOnly: true,
		hold:     func(r *rand.Rand) time.Duration { return between(r, 2, 4) },
		inject: func(t *testing.T, v int) {
			s.srv.SetClock(t, 0)
			s.srv.Restart(t, false)
		},
	})
	w.resource = func(r *run) (*chaos.Journal, func(int) fence.Store) {
		// A clock that ran ahead; in the test goroutine, before the
		// holders start.
		s.srv.SetClock(r.t, clockAhead)
		return memoryResource(r)
	}
	w.settle = func(t *testing.T) { s.srv.SetClock(t, 0) }
	mustFind(t, w, "clock-jump-counter-lost", chaos.InvIssuedOrder)
}

// mustFind runs w's runs in both modes and fails unless at least
// chaos.ControlShare percent of the runs of each mode violate inv: a
// scenario whose fault the checker must find, fenced or not.
func mustFind(t *testing.T, w *world, name, inv string) {
	runs, replay, seed := runSeeds(3)
	sc := scenario{name: name, adapter: "memory", control: []string{inv}}
	for _, fenced := range []bool{true, false} {
		mode := map[bool]string{true: "fenced", false: "unfenced"}[fenced]
		tl := newTally(sc, mode)
		ctl := &chaos.Control{Want: sc.control}
		for i := 0; moreControlRuns(i, runs, replay, ctl); i++ {
			rep, r := oneRun(t, w, seed(i), fenced)
			if rep == nil {
				return // the deployment broke; already reported
			}
			tl.add(rep, r, nil)
			ctl.Add(rep)
			logRun(t, sc, mode, i, seed(i), rep, r, nil)
			if len(rep.Details) > 0 && i == 0 {
				t.Logf("first run's findings:\n\t%s", strings.Join(rep.Details, "\n\t"))
			}
		}
		tl.done()
		summary(t, "%s %s (* must be found in ≥ %d%%): %s", name, mode, chaos.ControlShare, ctl)
		if !replay {
			for _, f := range ctl.Failures() {
				t.Errorf("%s %s: %s: the checker must find the documented unsafe case", name, mode, f)
			}
		}
	}
}
