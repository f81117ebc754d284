package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
)

func TestStatus(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	h := newHarness(t)
	if code := h.run("status", "--redis", redisURL(s), "--json", "report"); code != 0 {
		t.Fatalf("status of a free lock: exit = %d", code)
	}
	var st lockStatus
	if err := json.Unmarshal([]byte(h.stdout.String()), &st); err != nil || st.Held || st.Token != 0 {
		t.Errorf("status --json of a never-taken lock = %s (%v), want held false, token 0", h.stdout, err)
	}

	vars := acquireVars(t, s, "--ttl", "30s", "report")
	for _, asJSON := range []bool{false, true} {
		h := newHarness(t)
		args := []string{"status", "--redis", redisURL(s), "report"}
		if asJSON {
			args = []string{"status", "--json", "--redis", redisURL(s), "report"}
		}
		if code := h.run(args...); code != 0 {
			t.Fatalf("status exit = %d", code)
		}
		out := h.stdout.String()
		if strings.Contains(out, vars["FENCELOCK_SECRET"]) {
			t.Fatalf("status printed the owner secret: %s", out)
		}
		if !asJSON {
			for _, want := range []string{"held   yes", "lease  " + vars["FENCELOCK_LEASE"], "token  " + vars["FENCELOCK_TOKEN"]} {
				if !strings.Contains(out, want) {
					t.Errorf("status output = %q, want %q", out, want)
				}
			}
			continue
		}
		var st lockStatus
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		token, _ := strconv.ParseInt(vars["FENCELOCK_TOKEN"], 10, 64)
		if !st.Held || st.Lease != vars["FENCELOCK_LEASE"] || st.Token != token || st.TTLms <= 0 || st.TTLms > 30000 {
			t.Errorf("status --json = %+v, want held by lease %s, token %d, ttl in (0, 30s]", st, vars["FENCELOCK_LEASE"], token)
		}
	}
}

// A lock kept by the lock-delay of a lease that expired without a release
// is not "free": status says so with the delay left and the lease, and
// run -n, refused, says what keeps it.
func TestStatus_lockDelay(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	ctx := t.Context()
	c := fencelock.New(s.Client(t), &fencelock.Options{TTL: 200 * time.Millisecond, RenewInterval: -1, LockDelay: time.Minute})
	l, err := c.TryAcquire(ctx, "delayed")
	if err != nil {
		t.Fatal(err)
	}
	redistest.WaitFor(t, 10*time.Second, "the lease to expire", func() bool {
		h, err := c.Holder(ctx, "delayed")
		return err == nil && h.Delay > 0
	})
	h := newHarness(t)
	if code := h.run("status", "--redis", redisURL(s), "delayed"); code != 0 {
		t.Fatalf("status exit = %d", code)
	}
	if out := h.stdout.String(); !strings.Contains(out, "held   no (lock-delay: ") || !strings.Contains(out, "lease  "+l.ID()) {
		t.Errorf("status of a delayed lock = %q, want held no (lock-delay: ...) and lease %s", out, l.ID())
	}
	h = newHarness(t)
	if code := h.run("status", "--json", "--redis", redisURL(s), "delayed"); code != 0 {
		t.Fatalf("status --json exit = %d", code)
	}
	var st lockStatus
	if err := json.Unmarshal([]byte(h.stdout.String()), &st); err != nil || st.Held || st.DelayMs <= 0 || st.DelayMs > 60000 || st.Lease != l.ID() {
		t.Errorf("status --json of a delayed lock = %s (%v), want held false, delay_ms in (0, 60000], lease %s", h.stdout, err, l.ID())
	}
	h = newHarness(t)
	if code := h.run("run", "-n", "--redis", redisURL(s), "delayed", "--", "true"); code != exitNotAcquired {
		t.Fatalf("run -n of a delayed lock: exit %d, want %d", code, exitNotAcquired)
	}
	if msg := h.stderr.String(); !strings.Contains(msg, "kept by the lock-delay of lease "+l.ID()) || strings.Contains(msg, "free now") {
		t.Errorf("run -n of a delayed lock said %q, want it kept by the lock-delay of lease %s", msg, l.ID())
	}
}

// status NAME finds a semaphore by the number of permits it records: every
// permit held is not "held no".
func TestStatus_semaphoreFound(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	ctx := t.Context()
	sem := fencelock.New(s.Client(t), nil).Semaphore("found", 2)
	for range 2 {
		l, err := sem.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
	}
	h := newHarness(t)
	if code := h.run("status", "--redis", redisURL(s), "found"); code != 0 {
		t.Fatalf("status exit = %d", code)
	}
	if out := h.stdout.String(); !strings.Contains(out, "semaphore  found") || !strings.Contains(out, "permits    2, 0 free") {
		t.Errorf("status of a semaphore without --permits = %q, want its 2 permits, 0 free", out)
	}
}

// run --permits with another number than the semaphore's is a usage
// error that names both, before anything is taken.
func TestRun_permitsMismatch(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	ctx := t.Context()
	l, err := fencelock.New(s.Client(t), nil).Semaphore("sized", 3).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	h := newHarness(t)
	if code := h.run("run", "--permits", "5", "--redis", redisURL(s), "sized", "--", "true"); code != exitUsage {
		t.Fatalf("run --permits 5 on a semaphore of 3: exit %d, want %d", code, exitUsage)
	}
	if msg := h.stderr.String(); !strings.Contains(msg, `semaphore "sized" has 3 permits, not 5`) {
		t.Errorf("run --permits 5 on a semaphore of 3 said %q, want both numbers", msg)
	}
}

// resize changes a semaphore's number of permits on purpose: run with the
// new number goes ahead, with the old one is refused.
func TestResize(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	ctx := t.Context()
	c := fencelock.New(s.Client(t), nil)
	l, err := c.Semaphore("resized", 3).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l.Release(ctx)
	h := newHarness(t)
	if code := h.run("resize", "--permits", "5", "--redis", redisURL(s), "resized"); code != 0 {
		t.Fatalf("resize exit = %d", code)
	}
	if n, err := c.Permits(ctx, "resized"); err != nil || n != 5 {
		t.Errorf("Permits after resize --permits 5 = %d, %v; want 5", n, err)
	}
	if code := newHarness(t).run("run", "--permits", "5", "-n", "--redis", redisURL(s), "resized", "--", "true"); code != 0 {
		t.Errorf("run --permits 5 after the resize: exit %d, want 0", code)
	}
	if code := newHarness(t).run("run", "--permits", "3", "-n", "--redis", redisURL(s), "resized", "--", "true"); code != exitUsage {
		t.Errorf("run --permits 3 after the resize to 5: exit %d, want %d", code, exitUsage)
	}
	if code := newHarness(t).run("resize", "--redis", redisURL(s), "resized"); code != exitUsage {
		t.Errorf("resize without --permits: exit %d, want %d", code, exitUsage)
	}
}
