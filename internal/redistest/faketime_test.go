package redistest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestServer_setClock steps a FakeTime server's wall clock forwards and
// back while it runs and checks what the lock relies on: TIME follows the
// step at once, a forward step expires keys early, a backward step keeps
// them longer, and the offset survives a restart. A machine without
// libfaketime fails here, naming the package, rather than skipping.
func TestServer_setClock(t *testing.T) {
	t.Parallel()
	redistest.RequireFakeTime(t)
	s := redistest.Start(t, &redistest.Options{FakeTime: true})
	rdb := s.Client(t)
	ctx := t.Context()
	// skew returns how far the server's TIME is from this process's clock.
	skew := func() time.Duration {
		t.Helper()
		before := time.Now()
		got, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatalf("TIME: %v", err)
		}
		return got.Sub(before)
	}
	near := func(what string, got, want time.Duration) {
		t.Helper()
		if d := got - want; d < -time.Second || d > time.Second {
			t.Errorf("%s: server clock is %v from real time, want %v (±1s)", what, got, want)
		}
	}
	near("at start", skew(), 0)

	if err := rdb.Set(ctx, "k", "v", 10*time.Second).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	s.SetClock(t, time.Hour)
	near("after SetClock(1h)", skew(), time.Hour)
	if got, err := rdb.Get(ctx, "k").Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET of a 10s key after the clock jumped 1h forward = %q, %v; want redis.Nil (expired)", got, err)
	}

	if err := rdb.Set(ctx, "k", "v", 10*time.Second).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	s.SetClock(t, -time.Hour)
	near("after SetClock(-1h)", skew(), -time.Hour)
	if got, err := rdb.PTTL(ctx, "k").Result(); err != nil || got < 2*time.Hour {
		t.Errorf("PTTL of a 10s key after the clock jumped 2h back = %v, %v; want > 2h", got, err)
	}

	s.Restart(t, false)
	near("after Restart", skew(), -time.Hour)
	s.SetClock(t, 0)
	near("after SetClock(0)", skew(), 0)
}

// TestServer_setClockWithoutFakeTime: SetClock on a server started
// without FakeTime is a test error, not a silent no-op.
func TestServer_setClockWithoutFakeTime(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	ft := &fatalRecorder{TB: t}
	func() {
		defer func() { recover() }()
		s.SetClock(ft, time.Second)
	}()
	if !ft.fatal {
		t.Errorf("SetClock on a server without FakeTime did not fail the test")
	}
}

// fatalRecorder records Fatalf instead of ending the test, and unwinds
// the caller with a panic that the test recovers.
type fatalRecorder struct {
	testing.TB
	fatal bool
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(string, ...any) {
	f.fatal = true
	panic(f)
}
