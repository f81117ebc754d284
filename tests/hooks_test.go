package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// hookLog collects the events of a fencelock.Hooks; every event is also
// sent on a channel, so tests can wait for one without sleeping.
type hookLog struct {
	mu       sync.Mutex
	attempts []fencelock.AcquireAttemptInfo
	acquires []fencelock.AcquireDoneInfo
	renews   []fencelock.RenewDoneInfo
	losses   []fencelock.LeaseLostInfo
	releases []fencelock.ReleaseDoneInfo
	traces   []string // event:trace, the value of traceKey in the hook's context
	events   chan string
}

func newHookLog() *hookLog { return &hookLog{events: make(chan string, 100)} }

func (h *hookLog) hooks() *fencelock.Hooks {
	return &fencelock.Hooks{
		AcquireAttempt: func(ctx context.Context, i fencelock.AcquireAttemptInfo) { record(ctx, h, &h.attempts, i, "attempt") },
		AcquireDone:    func(ctx context.Context, i fencelock.AcquireDoneInfo) { record(ctx, h, &h.acquires, i, "acquire") },
		RenewDone:      func(ctx context.Context, i fencelock.RenewDoneInfo) { record(ctx, h, &h.renews, i, "renew") },
		LeaseLost:      func(ctx context.Context, i fencelock.LeaseLostInfo) { record(ctx, h, &h.losses, i, "lost") },
		ReleaseDone:    func(ctx context.Context, i fencelock.ReleaseDoneInfo) { record(ctx, h, &h.releases, i, "release") },
	}
}

func record[T any](ctx context.Context, h *hookLog, s *[]T, v T, event string) {
	h.mu.Lock()
	*s = append(*s, v)
	h.traces = append(h.traces, event+":"+traceOf(ctx))
	h.mu.Unlock()
	h.events <- event
}

// traceKey carries a value through contexts, as a tracer's span does: the
// hooks must see the caller's.
type traceKey struct{}

func traceOf(ctx context.Context) string {
	s, _ := ctx.Value(traceKey{}).(string)
	return s
}

// wait waits for the next event named event, failing after a few seconds;
// other events are skipped.
func (h *hookLog) wait(t *testing.T, event string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case e := <-h.events:
			if e == event {
				return
			}
		case <-timeout:
			t.Fatalf("no %q event within 5s", event)
		}
	}
}

func TestHooks_lifecycle(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	h := newHookLog()
	c := newClient(t, rdb, &fencelock.Options{RenewInterval: -1, Hooks: h.hooks()})

	l, err := c.TryAcquire(t.Context(), "hooked")
	if err != nil {
		t.Fatalf("TryAcquire() error = %v", err)
	}
	if err := l.Renew(t.Context()); err != nil {
		t.Fatalf("Renew() error = %v", err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatalf("Release() error = %v", err)
	}
	l.Release(t.Context()) // idempotent: no second event

	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.attempts) != 1 || len(h.acquires) != 1 || len(h.renews) != 1 || len(h.releases) != 1 || len(h.losses) != 0 {
		t.Fatalf("events: got %d attempts, %d acquires, %d renews, %d releases, %d losses; want 1, 1, 1, 1, 0",
			len(h.attempts), len(h.acquires), len(h.renews), len(h.releases), len(h.losses))
	}
	a := h.attempts[0]
	if a.Name != "hooked" || a.Attempt != 1 || a.Token != l.Token() || a.Err != nil || a.Latency <= 0 {
		t.Errorf("AcquireAttempt: got %+v, want name hooked, attempt 1, token %d, no error, latency > 0", a, l.Token())
	}
	d := h.acquires[0]
	if d.Name != "hooked" || d.Token != l.Token() || d.LeaseID != l.ID() || d.Attempts != 1 || d.Err != nil || d.Wait < d.Latency {
		t.Errorf("AcquireDone: got %+v, want token %d, lease %q, 1 attempt, no error, wait >= latency", d, l.Token(), l.ID())
	}
	r := h.renews[0]
	if r.Token != l.Token() || r.LeaseID != l.ID() || r.Err != nil || r.Latency <= 0 || r.Deadline.IsZero() {
		t.Errorf("RenewDone: got %+v, want token %d, lease %q, no error", r, l.Token(), l.ID())
	}
	rel := h.releases[0]
	if rel.Token != l.Token() || rel.LeaseID != l.ID() || rel.Err != nil || rel.Held < rel.Latency {
		t.Errorf("ReleaseDone: got %+v, want token %d, lease %q, no error, held >= latency", rel, l.Token(), l.ID())
	}
}

func TestHooks_notAcquired(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	h := newHookLog()
	c := newClient(t, rdb, &fencelock.Options{RenewInterval: -1, Hooks: h.hooks()})
	holder := newClient(t, rdb, &fencelock.Options{RenewInterval: -1})
	l, err := holder.TryAcquire(t.Context(), "busy")
	if err != nil {
		t.Fatalf("TryAcquire() error = %v", err)
	}
	defer l.Release(t.Context())

	if _, err := c.TryAcquire(t.Context(), "busy"); !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Fatalf("TryAcquire(held) error = %v, want ErrNotAcquired", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.attempts) != 1 || len(h.acquires) != 1 {
		t.Fatalf("events: got %d attempts, %d acquires; want 1, 1", len(h.attempts), len(h.acquires))
	}
	if a := h.attempts[0]; !errors.Is(a.Err, fencelock.ErrNotAcquired) || a.Token != 0 || a.Remaining <= 0 {
		t.Errorf("AcquireAttempt: got %+v, want ErrNotAcquired, token 0, held > 0", a)
	}
	if d := h.acquires[0]; !errors.Is(d.Err, fencelock.ErrNotAcquired) || d.Token != 0 || d.LeaseID != "" {
		t.Errorf("AcquireDone: got %+v, want ErrNotAcquired, no token or lease", d)
	}
}

// Acquire reports each round trip, then one result whose wait spans them.
func TestHooks_acquireWaits(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	h := newHookLog()
	c := newClient(t, rdb, &fencelock.Options{RenewInterval: -1, Hooks: h.hooks()})
	holder := newClient(t, rdb, &fencelock.Options{RenewInterval: -1})
	first, err := holder.TryAcquire(t.Context(), "queue")
	if err != nil {
		t.Fatalf("TryAcquire() error = %v", err)
	}

	type result struct {
		l   *fencelock.Lease
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := c.Acquire(t.Context(), "queue")
		done <- result{l, err}
	}()
	h.wait(t, "attempt") // the waiter found the lock held
	if err := first.Release(t.Context()); err != nil {
		t.Fatalf("Release() error = %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("Acquire() error = %v", r.err)
	}
	defer r.l.Release(t.Context())

	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.acquires) != 1 {
		t.Fatalf("AcquireDone events: got %d, want 1", len(h.acquires))
	}
	d := h.acquires[0]
	if d.Attempts < 2 || d.Attempts != len(h.attempts) || d.Token != r.l.Token() || d.Err != nil {
		t.Errorf("AcquireDone: got %+v, want >= 2 attempts (%d reported), token %d", d, len(h.attempts), r.l.Token())
	}
	var sum time.Duration
	for i, a := range h.attempts {
		if a.Attempt != i+1 {
			t.Errorf("attempt %d: got Attempt %d", i+1, a.Attempt)
		}
		sum += a.Latency
	}
	if d.Wait < sum {
		t.Errorf("AcquireDone.Wait = %v, want >= the attempts' total latency %v", d.Wait, sum)
	}
}

// A lock deleted behind the holder's back: the renewal sees it gone, the
// lease is lost once, and Release reports the loss.
func TestHooks_lost(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	h := newHookLog()
	c := newClient(t, rdb, &fencelock.Options{RenewInterval: -1, Hooks: h.hooks()})
	l, err := c.TryAcquire(t.Context(), "doomed")
	if err != nil {
		t.Fatalf("TryAcquire() error = %v", err)
	}
	if err := rdb.Del(t.Context(), "fencelock:{doomed}").Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(t.Context()); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Fatalf("Renew() error = %v, want ErrLeaseLost", err)
	}
	if err := l.Release(t.Context()); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Fatalf("Release() error = %v, want ErrLeaseLost", err)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.losses) != 1 {
		t.Fatalf("LeaseLost events: got %d, want 1", len(h.losses))
	}
	if lost := h.losses[0]; !errors.Is(lost.Cause, fencelock.ErrLeaseLost) || lost.Token != l.Token() || lost.LeaseID != l.ID() || lost.Held <= 0 {
		t.Errorf("LeaseLost: got %+v, want cause ErrLeaseLost, token %d, lease %q", lost, l.Token(), l.ID())
	}
	if len(h.renews) != 1 || !errors.Is(h.renews[0].Err, fencelock.ErrLeaseLost) {
		t.Errorf("RenewDone: got %+v, want one with ErrLeaseLost", h.renews)
	}
	if len(h.releases) != 1 || !errors.Is(h.releases[0].Err, fencelock.ErrLeaseLost) {
		t.Errorf("ReleaseDone: got %+v, want one with ErrLeaseLost", h.releases)
	}
}

// A Release that finds the lock gone reports the loss the keeper had not
// seen, once, before the release itself.
func TestHooks_lostAtRelease(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	h := newHookLog()
	c := newClient(t, rdb, &fencelock.Options{RenewInterval: -1, Hooks: h.hooks()})
	l, err := c.TryAcquire(t.Context(), "vanished")
	if err != nil {
		t.Fatalf("TryAcquire() error = %v", err)
	}
	if err := rdb.Del(t.Context(), "fencelock:{vanished}").Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(t.Context()); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Fatalf("Release() error = %v, want ErrLeaseLost", err)
	}
	var order []string
	for len(h.events) > 0 {
		order = append(order, <-h.events)
	}
	if want := []string{"attempt", "acquire", "lost", "release"}; strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("events: got %q, want %q", order, want)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.losses) != 1 || !errors.Is(h.losses[0].Cause, fencelock.ErrLeaseLost) {
		t.Errorf("LeaseLost: got %+v, want one with ErrLeaseLost", h.losses)
	}
}

// A lease whose deadline passes is lost by its timer; the keeper-less
// lease reports it exactly once.
func TestHooks_expired(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	h := newHookLog()
	c := newClient(t, rdb, &fencelock.Options{TTL: 50 * time.Millisecond, RenewInterval: -1, Hooks: h.hooks()})
	l, err := c.TryAcquire(t.Context(), "short")
	if err != nil {
		t.Fatalf("TryAcquire() error = %v", err)
	}
	h.wait(t, "lost")
	if err := l.Release(t.Context()); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Fatalf("Release() error = %v, want ErrLeaseLost", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.losses) != 1 || !errors.Is(h.losses[0].Cause, fencelock.ErrLeaseLost) {
		t.Errorf("LeaseLost: got %+v, want one with ErrLeaseLost", h.losses)
	}
}

// Options.Hooks is copied: changing it after New changes nothing.
func TestHooks_copied(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	var called bool
	hooks := &fencelock.Hooks{AcquireDone: func(context.Context, fencelock.AcquireDoneInfo) { called = true }}
	c := newClient(t, rdb, &fencelock.Options{RenewInterval: -1, Hooks: hooks})
	hooks.AcquireDone = nil
	l, err := c.TryAcquire(t.Context(), "copied")
	if err != nil {
		t.Fatalf("TryAcquire() error = %v", err)
	}
	l.Release(t.Context())
	if !called {
		t.Errorf("AcquireDone set at New: not called after the caller cleared it")
	}
}

// logRecords decodes a JSON log.
func logRecords(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		recs = append(recs, m)
	}
	return recs
}

// findRecord returns the first record with message msg.
func findRecord(recs []map[string]any, msg string) map[string]any {
	for _, r := range recs {
		if r["msg"] == msg {
			return r
		}
	}
	return nil
}

// syncBuffer is a bytes.Buffer safe for the keeper and the test at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) snapshot() *bytes.Buffer {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.NewBuffer(bytes.Clone(b.buf.Bytes()))
}

func TestLogger_leaseLost(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := newHookLog()
	c := newClient(t, rdb, &fencelock.Options{Logger: logger, Hooks: h.hooks()})
	l, err := c.TryAcquire(t.Context(), "logged")
	if err != nil {
		t.Fatalf("TryAcquire() error = %v", err)
	}
	// The value in Redis is the secret; take it away, so that the next
	// renewal finds the lease lost.
	secret, err := rdb.GetDel(t.Context(), "fencelock:{logged}").Result()
	if err != nil {
		t.Fatal(err)
	}
	if secret != l.Secret() {
		t.Fatalf("lock value %q is not Lease.Secret() %q", secret, l.Secret())
	}
	if err := l.Renew(t.Context()); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Fatalf("Renew() error = %v, want ErrLeaseLost", err)
	}
	l.Release(t.Context())

	out := buf.snapshot()
	if strings.Contains(out.String(), secret) {
		t.Errorf("log contains the lease's secret:\n%s", out)
	}
	rec := findRecord(logRecords(t, out), "fencelock: lease lost")
	if rec == nil {
		t.Fatalf("no %q record in log:\n%s", "fencelock: lease lost", out)
	}
	want := map[string]any{"level": "WARN", "lock": "logged", "lease": l.ID(), "token": float64(l.Token())}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("record[%q] = %v, want %v", k, rec[k], v)
		}
	}
	if e, _ := rec["error"].(string); !strings.Contains(e, fencelock.ErrLeaseLost.Error()) {
		t.Errorf("record[error] = %q, want it to mention %q", e, fencelock.ErrLeaseLost)
	}
}

// A renewal that fails on a stalled server is logged, and so is the
// renewal that succeeds after it; neither ends the lease.
func TestLogger_renewRecovers(t *testing.T) {
	skipOnTransport(t, "a stalled server's request ends at go-redis's ReadTimeout, which rueidis has not")
	t.Parallel()
	s := redistest.New(t)
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: s.Addr(), ReadTimeout: 50 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	var buf syncBuffer
	h := newHookLog()
	c := newClient(t, rdb, &fencelock.Options{
		RenewInterval: -1, Hooks: h.hooks(),
		Logger: slog.New(slog.NewJSONHandler(&buf, nil)),
	})
	l, err := c.TryAcquire(t.Context(), "flaky")
	if err != nil {
		t.Fatalf("TryAcquire() error = %v", err)
	}
	defer l.Release(t.Context())

	s.Pause(t)
	err = l.Renew(t.Context())
	s.Resume(t)
	if err == nil || errors.Is(err, fencelock.ErrLeaseLost) {
		t.Fatalf("Renew() on a stalled server error = %v, want a timeout", err)
	}
	if err := l.Renew(t.Context()); err != nil {
		t.Fatalf("Renew() after resume error = %v", err)
	}

	h.mu.Lock()
	if len(h.renews) != 2 || h.renews[0].Err == nil || h.renews[1].Err != nil || len(h.losses) != 0 {
		t.Errorf("RenewDone: got %+v, losses %+v; want a failure, then a success, no loss", h.renews, h.losses)
	}
	h.mu.Unlock()

	out := buf.snapshot()
	recs := logRecords(t, out)
	failed := findRecord(recs, "fencelock: renew failed")
	if failed == nil || failed["lock"] != "flaky" || failed["lease"] != l.ID() || failed["error"] == nil || failed["failures"] != float64(1) {
		t.Errorf("renew failed record: got %v, want lock, lease, error, failures 1\n%s", failed, out)
	}
	ok := findRecord(recs, "fencelock: renew succeeded after failures")
	if ok == nil || ok["level"] != "INFO" || ok["failures"] != float64(1) {
		t.Errorf("renew recovered record: got %v, want INFO with failures 1\n%s", ok, out)
	}
	if strings.Contains(out.String(), l.Secret()) {
		t.Errorf("log contains the lease's secret:\n%s", out)
	}
}

// benchmarkHooks acquires and releases one lock per iteration.
func benchmarkHooks(b *testing.B, opts *fencelock.Options) {
	s := redistest.New(b)
	c := newClient(b, s.Client(b), opts)
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.TryAcquire(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHooks_nil is the baseline: no hooks, no logger.
func BenchmarkHooks_nil(b *testing.B) {
	benchmarkHooks(b, &fencelock.Options{RenewInterval: -1})
}

// BenchmarkHooks_noop sets every hook to a function that does nothing: the
// cost of building and delivering the events.
func BenchmarkHooks_noop(b *testing.B) {
	benchmarkHooks(b, &fencelock.Options{RenewInterval: -1, Hooks: &fencelock.Hooks{
		AcquireAttempt: func(context.Context, fencelock.AcquireAttemptInfo) {},
		AcquireDone:    func(context.Context, fencelock.AcquireDoneInfo) {},
		RenewDone:      func(context.Context, fencelock.RenewDoneInfo) {},
		LeaseLost:      func(context.Context, fencelock.LeaseLostInfo) {},
		ReleaseDone:    func(context.Context, fencelock.ReleaseDoneInfo) {},
	}})
}

// Hooks get the caller's context (TryAcquire, Renew, Release), and the
// acquisition's values where nobody calls (the keeper's renewals, a loss
// found by it), so spans nest under the caller's and logs keep its trace.
func TestHooks_context(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	h := newHookLog()
	var logged syncBuffer
	logger := slog.New(traceHandler{slog.NewJSONHandler(&logged, nil)})
	c := newClient(t, rdb, &fencelock.Options{TTL: time.Minute, RenewInterval: 50 * time.Millisecond, Hooks: h.hooks(), Logger: logger})
	with := func(trace string) context.Context { return context.WithValue(t.Context(), traceKey{}, trace) }

	l, err := c.TryAcquire(with("acquire"), "traced")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	h.wait(t, "renew") // the keeper's
	if err := l.Renew(with("renew")); err != nil {
		t.Fatalf("Renew error = %v", err)
	}
	rdb.Del(t.Context(), "fencelock:{traced}")
	h.wait(t, "lost") // found by the keeper
	l.Release(with("release"))

	h.mu.Lock()
	traces := strings.Join(h.traces, " ")
	h.mu.Unlock()
	for _, want := range []string{"attempt:acquire", "acquire:acquire", "renew:acquire", "renew:renew", "lost:acquire", "release:release"} {
		if !strings.Contains(traces, want) {
			t.Errorf("hook contexts %q: want %q among them", traces, want)
		}
	}
	rec := findRecord(logRecords(t, logged.snapshot()), "fencelock: lease lost")
	if rec == nil || rec["trace"] != "acquire" {
		t.Errorf("lease lost log record %v: want trace %q from the acquisition's context", rec, "acquire")
	}
}

// traceHandler adds the context's traceKey value to each record, as a
// tracing handler adds the span's IDs.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	r.AddAttrs(slog.String("trace", traceOf(ctx)))
	return h.Handler.Handle(ctx, r)
}
