package fenceprom_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fenceprom"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// sample returns the value of the series name{labels} in reg: a counter's
// or gauge's value, a histogram's sample count. It fails the test if
// there is no such series.
func sample(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() error = %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// The story of one lock told by the metrics: an acquisition, a contender
// turned away, a renewal, a loss behind the holder's back, a new holder,
// and the old holder's write rejected as stale.
func TestCollector(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	m := fenceprom.New(nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	c := fencelock.New(rdb, &fencelock.Options{RenewInterval: -1, Hooks: m.Hooks()})
	store := fence.WithHooks(&fence.Memory{}, m.FenceHooks())
	ctx := t.Context()

	old, err := c.TryAcquire(ctx, "orders")
	if err != nil {
		t.Fatalf("TryAcquire() error = %v", err)
	}
	if got := sample(t, reg, "fencelock_leases_held", nil); got != 1 {
		t.Errorf("fencelock_leases_held after an acquisition = %v, want 1", got)
	}
	if _, err := c.TryAcquire(ctx, "orders"); !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Fatalf("TryAcquire(held) error = %v, want ErrNotAcquired", err)
	}
	if err := old.Renew(ctx); err != nil {
		t.Fatalf("Renew() error = %v", err)
	}
	if err := store.Put(ctx, "order-1", old.Fence(), []byte("paid")); err != nil {
		t.Fatalf("Put(old) error = %v", err)
	}
	// The lock vanishes (eviction, failover): the holder learns at its
	// next renewal, and a new holder gets a greater token.
	if err := rdb.Del(ctx, "fencelock:{orders}").Err(); err != nil {
		t.Fatal(err)
	}
	if err := old.Renew(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Fatalf("Renew() after the lock vanished error = %v, want ErrLeaseLost", err)
	}
	cur, err := c.TryAcquire(ctx, "orders")
	if err != nil {
		t.Fatalf("TryAcquire() error = %v", err)
	}
	if err := store.Put(ctx, "order-1", cur.Fence(), []byte("shipped")); err != nil {
		t.Fatalf("Put(new) error = %v", err)
	}
	if err := store.Put(ctx, "order-1", old.Fence(), []byte("refunded")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Put(old) after a newer holder error = %v, want ErrStale", err)
	}
	if err := old.Release(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Fatalf("Release(old) error = %v, want ErrLeaseLost", err)
	}
	if err := cur.Release(ctx); err != nil {
		t.Fatalf("Release(new) error = %v", err)
	}

	want := `
# HELP fencelock_acquire_attempts_total Acquisition round trips, by result: acquired (a token was issued), not_acquired (another lease holds the lock), error.
# TYPE fencelock_acquire_attempts_total counter
fencelock_acquire_attempts_total{result="acquired"} 2
fencelock_acquire_attempts_total{result="error"} 0
fencelock_acquire_attempts_total{result="not_acquired"} 1
# HELP fencelock_acquires_total TryAcquire and Acquire calls, by result: acquired, not_acquired (held by another lease, or Acquire's context ended), not_replicated, error.
# TYPE fencelock_acquires_total counter
fencelock_acquires_total{result="acquired"} 2
fencelock_acquires_total{result="error"} 0
fencelock_acquires_total{result="not_acquired"} 1
fencelock_acquires_total{result="not_replicated"} 0
# HELP fencelock_fence_accesses_total Fenced accesses to protected resources (put, get, delete; tx: sqlfence Tx; http, grpc: requests and calls the middleware checked), by result: accepted, stale (refused: the resource accepted a newer fence), error.
# TYPE fencelock_fence_accesses_total counter
fencelock_fence_accesses_total{op="delete",result="accepted"} 0
fencelock_fence_accesses_total{op="delete",result="error"} 0
fencelock_fence_accesses_total{op="delete",result="stale"} 0
fencelock_fence_accesses_total{op="get",result="accepted"} 0
fencelock_fence_accesses_total{op="get",result="error"} 0
fencelock_fence_accesses_total{op="get",result="stale"} 0
fencelock_fence_accesses_total{op="grpc",result="accepted"} 0
fencelock_fence_accesses_total{op="grpc",result="error"} 0
fencelock_fence_accesses_total{op="grpc",result="stale"} 0
fencelock_fence_accesses_total{op="http",result="accepted"} 0
fencelock_fence_accesses_total{op="http",result="error"} 0
fencelock_fence_accesses_total{op="http",result="stale"} 0
fencelock_fence_accesses_total{op="put",result="accepted"} 2
fencelock_fence_accesses_total{op="put",result="error"} 0
fencelock_fence_accesses_total{op="put",result="stale"} 1
fencelock_fence_accesses_total{op="tx",result="accepted"} 0
fencelock_fence_accesses_total{op="tx",result="error"} 0
fencelock_fence_accesses_total{op="tx",result="stale"} 0
# HELP fencelock_leases_held Leases acquired and neither released nor lost yet.
# TYPE fencelock_leases_held gauge
fencelock_leases_held 0
# HELP fencelock_leases_lost_total Leases lost: the lock was found gone or taken, or the lease's deadline passed without a renewal.
# TYPE fencelock_leases_lost_total counter
fencelock_leases_lost_total 1
# HELP fencelock_releases_total Releases, by result: ok, lost (the lease had been lost or the lock was gone or taken), error.
# TYPE fencelock_releases_total counter
fencelock_releases_total{result="error"} 0
fencelock_releases_total{result="lost"} 1
fencelock_releases_total{result="ok"} 1
# HELP fencelock_renewals_total Renewal round trips, by result: ok, error (a Redis or network error; the lease lives on until its deadline), lost.
# TYPE fencelock_renewals_total counter
fencelock_renewals_total{result="error"} 0
fencelock_renewals_total{result="lost"} 1
fencelock_renewals_total{result="ok"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"fencelock_acquire_attempts_total", "fencelock_acquires_total", "fencelock_fence_accesses_total",
		"fencelock_leases_held", "fencelock_leases_lost_total", "fencelock_releases_total", "fencelock_renewals_total",
	); err != nil {
		t.Error(err)
	}

	// Histograms: one sample per round trip or lease.
	for _, h := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"fencelock_acquire_attempt_duration_seconds", nil, 3},
		{"fencelock_acquire_wait_seconds", nil, 2},
		{"fencelock_renew_duration_seconds", nil, 2},
		{"fencelock_release_duration_seconds", nil, 2},
		{"fencelock_lease_duration_seconds", nil, 2}, // the old lease counts once: lost, then released
		{"fencelock_fence_access_duration_seconds", map[string]string{"op": "put"}, 3},
	} {
		if got := sample(t, reg, h.name, h.labels); got != h.want {
			t.Errorf("%s%v sample count = %v, want %v", h.name, h.labels, got, h.want)
		}
	}
}

// TestCollector_zeroBeforeEvents shows that every series exists, at 0,
// right after registration, so that increase() over a counter sees the
// first event: a series that appears at 1 shows no increase.
func TestCollector_zeroBeforeEvents(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(fenceprom.New(nil))
	want := `
# HELP fencelock_leases_held Leases acquired and neither released nor lost yet.
# TYPE fencelock_leases_held gauge
fencelock_leases_held 0
# HELP fencelock_leases_lost_total Leases lost: the lock was found gone or taken, or the lease's deadline passed without a renewal.
# TYPE fencelock_leases_lost_total counter
fencelock_leases_lost_total 0
# HELP fencelock_renewals_total Renewal round trips, by result: ok, error (a Redis or network error; the lease lives on until its deadline), lost.
# TYPE fencelock_renewals_total counter
fencelock_renewals_total{result="error"} 0
fencelock_renewals_total{result="lost"} 0
fencelock_renewals_total{result="ok"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"fencelock_leases_held", "fencelock_leases_lost_total", "fencelock_renewals_total"); err != nil {
		t.Error(err)
	}
	for _, s := range []struct {
		name   string
		labels map[string]string
	}{
		{"fencelock_acquire_attempts_total", map[string]string{"result": "error"}},
		{"fencelock_acquires_total", map[string]string{"result": "not_replicated"}},
		{"fencelock_releases_total", map[string]string{"result": "lost"}},
		{"fencelock_fence_accesses_total", map[string]string{"op": "put", "result": "stale"}},
		{"fencelock_fence_accesses_total", map[string]string{"op": "delete", "result": "error"}},
		{"fencelock_fence_accesses_total", map[string]string{"op": "tx", "result": "stale"}},
		{"fencelock_fence_accesses_total", map[string]string{"op": "http", "result": "stale"}},
		{"fencelock_fence_accesses_total", map[string]string{"op": "grpc", "result": "stale"}},
		{"fencelock_lease_duration_seconds", nil},
		{"fencelock_fence_access_duration_seconds", map[string]string{"op": "get"}},
	} {
		if got := sample(t, reg, s.name, s.labels); got != 0 {
			t.Errorf("%s%v = %v before any event, want 0", s.name, s.labels, got)
		}
	}
}

// The accesses of the adapters that report through fence.Hooks.Report
// (sqlfence's Tx, httpfence, grpcfence) are counted under their own op,
// whose series exist at zero from the start like the Store methods'.
func TestCollector_adapterOps(t *testing.T) {
	m := fenceprom.New(nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	cur := fence.Fence{Lock: "orders", Token: 7, Lease: "b"}
	f := fence.Fence{Lock: "orders", Token: 5, Lease: "a"}
	h := m.FenceHooks()
	for _, op := range []string{"tx", "http", "grpc"} {
		h.Report(t.Context(), fence.AccessInfo{Op: op, Resource: "r", Fence: f, Err: &fence.StaleError{Current: cur, Rejected: f}})
		h.Report(t.Context(), fence.AccessInfo{Op: op, Resource: "r", Fence: cur})
	}
	for _, op := range []string{"tx", "http", "grpc"} {
		for result, want := range map[string]float64{"stale": 1, "accepted": 1, "error": 0} {
			if got := sample(t, reg, "fencelock_fence_accesses_total", map[string]string{"op": op, "result": result}); got != want {
				t.Errorf("fencelock_fence_accesses_total{op=%q,result=%q} = %v, want %v", op, result, got, want)
			}
		}
	}
}

// With LockLabel, a lock's series are made at zero when the lock is first
// seen, before its first loss.
func TestCollector_zeroOnFirstSight(t *testing.T) {
	m := fenceprom.New(&fenceprom.Options{LockLabel: true})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	m.Hooks().AcquireAttempt(t.Context(), fencelock.AcquireAttemptInfo{Name: "orders", Attempt: 1, Token: 7})
	for _, s := range []struct {
		name   string
		labels map[string]string
	}{
		{"fencelock_leases_lost_total", map[string]string{"lock": "orders"}},
		{"fencelock_renewals_total", map[string]string{"lock": "orders", "result": "error"}},
		{"fencelock_leases_held", map[string]string{"lock": "orders"}},
	} {
		if got := sample(t, reg, s.name, s.labels); got != 0 {
			t.Errorf("%s%v = %v after the lock's first attempt, want 0", s.name, s.labels, got)
		}
	}
}

// Lock and resource names become labels only when asked for, and an
// invalid fence never supplies a label value.
func TestCollector_labels(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	m := fenceprom.New(&fenceprom.Options{LockLabel: true, ResourceLabel: true})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	c := fencelock.New(rdb, &fencelock.Options{RenewInterval: -1, Hooks: m.Hooks()})
	store := fence.WithHooks(&fence.Memory{}, m.FenceHooks())
	ctx := t.Context()

	l, err := c.TryAcquire(ctx, "orders")
	if err != nil {
		t.Fatalf("TryAcquire() error = %v", err)
	}
	if err := store.Put(ctx, "order-1", l.Fence(), nil); err != nil {
		t.Fatalf("Put() error = %v", err)
	}
	bad := fence.Fence{Lock: "attacker\x00chosen", Token: 1, Lease: "x"}
	if err := store.Put(ctx, "order-1", bad, nil); !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("Put(invalid) error = %v, want ErrInvalid", err)
	}
	if got := sample(t, reg, "fencelock_leases_held", map[string]string{"lock": "orders"}); got != 1 {
		t.Errorf(`fencelock_leases_held{lock="orders"} = %v, want 1`, got)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release() error = %v", err)
	}

	want := `
# HELP fencelock_fence_accesses_total Fenced accesses to protected resources (put, get, delete; tx: sqlfence Tx; http, grpc: requests and calls the middleware checked), by result: accepted, stale (refused: the resource accepted a newer fence), error.
# TYPE fencelock_fence_accesses_total counter
fencelock_fence_accesses_total{lock="",op="delete",resource="order-1",result="accepted"} 0
fencelock_fence_accesses_total{lock="",op="delete",resource="order-1",result="error"} 0
fencelock_fence_accesses_total{lock="",op="delete",resource="order-1",result="stale"} 0
fencelock_fence_accesses_total{lock="",op="get",resource="order-1",result="accepted"} 0
fencelock_fence_accesses_total{lock="",op="get",resource="order-1",result="error"} 0
fencelock_fence_accesses_total{lock="",op="get",resource="order-1",result="stale"} 0
fencelock_fence_accesses_total{lock="",op="grpc",resource="order-1",result="accepted"} 0
fencelock_fence_accesses_total{lock="",op="grpc",resource="order-1",result="error"} 0
fencelock_fence_accesses_total{lock="",op="grpc",resource="order-1",result="stale"} 0
fencelock_fence_accesses_total{lock="",op="http",resource="order-1",result="accepted"} 0
fencelock_fence_accesses_total{lock="",op="http",resource="order-1",result="error"} 0
fencelock_fence_accesses_total{lock="",op="http",resource="order-1",result="stale"} 0
fencelock_fence_accesses_total{lock="",op="put",resource="order-1",result="accepted"} 0
fencelock_fence_accesses_total{lock="",op="put",resource="order-1",result="error"} 1
fencelock_fence_accesses_total{lock="",op="put",resource="order-1",result="stale"} 0
fencelock_fence_accesses_total{lock="",op="tx",resource="order-1",result="accepted"} 0
fencelock_fence_accesses_total{lock="",op="tx",resource="order-1",result="error"} 0
fencelock_fence_accesses_total{lock="",op="tx",resource="order-1",result="stale"} 0
fencelock_fence_accesses_total{lock="orders",op="delete",resource="order-1",result="accepted"} 0
fencelock_fence_accesses_total{lock="orders",op="delete",resource="order-1",result="error"} 0
fencelock_fence_accesses_total{lock="orders",op="delete",resource="order-1",result="stale"} 0
fencelock_fence_accesses_total{lock="orders",op="get",resource="order-1",result="accepted"} 0
fencelock_fence_accesses_total{lock="orders",op="get",resource="order-1",result="error"} 0
fencelock_fence_accesses_total{lock="orders",op="get",resource="order-1",result="stale"} 0
fencelock_fence_accesses_total{lock="orders",op="grpc",resource="order-1",result="accepted"} 0
fencelock_fence_accesses_total{lock="orders",op="grpc",resource="order-1",result="error"} 0
fencelock_fence_accesses_total{lock="orders",op="grpc",resource="order-1",result="stale"} 0
fencelock_fence_accesses_total{lock="orders",op="http",resource="order-1",result="accepted"} 0
fencelock_fence_accesses_total{lock="orders",op="http",resource="order-1",result="error"} 0
fencelock_fence_accesses_total{lock="orders",op="http",resource="order-1",result="stale"} 0
fencelock_fence_accesses_total{lock="orders",op="put",resource="order-1",result="accepted"} 1
fencelock_fence_accesses_total{lock="orders",op="put",resource="order-1",result="error"} 0
fencelock_fence_accesses_total{lock="orders",op="put",resource="order-1",result="stale"} 0
fencelock_fence_accesses_total{lock="orders",op="tx",resource="order-1",result="accepted"} 0
fencelock_fence_accesses_total{lock="orders",op="tx",resource="order-1",result="error"} 0
fencelock_fence_accesses_total{lock="orders",op="tx",resource="order-1",result="stale"} 0
# HELP fencelock_releases_total Releases, by result: ok, lost (the lease had been lost or the lock was gone or taken), error.
# TYPE fencelock_releases_total counter
fencelock_releases_total{lock="orders",result="error"} 0
fencelock_releases_total{lock="orders",result="lost"} 0
fencelock_releases_total{lock="orders",result="ok"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"fencelock_fence_accesses_total", "fencelock_releases_total"); err != nil {
		t.Error(err)
	}
}

// A lease whose deadline passes unrenewed is counted lost by its timer.
func TestCollector_expired(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	m := fenceprom.New(nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	// Hooks run synchronously: the wrapper's signal comes after the
	// Collector's hook has counted the loss.
	hooks := m.Hooks()
	lost := make(chan struct{})
	count := hooks.LeaseLost
	hooks.LeaseLost = func(ctx context.Context, i fencelock.LeaseLostInfo) { count(ctx, i); close(lost) }
	c := fencelock.New(rdb, &fencelock.Options{TTL: 50 * time.Millisecond, RenewInterval: -1, Hooks: hooks})
	l, err := c.TryAcquire(t.Context(), "short")
	if err != nil {
		t.Fatalf("TryAcquire() error = %v", err)
	}
	select {
	case <-lost:
	case <-time.After(5 * time.Second):
		t.Fatal("lease not lost 5s after its 50ms TTL")
	}
	if got := sample(t, reg, "fencelock_leases_lost_total", nil); got != 1 {
		t.Errorf("fencelock_leases_lost_total = %v, want 1", got)
	}
	l.Release(t.Context())
	if got := sample(t, reg, "fencelock_leases_held", nil); got != 0 {
		t.Errorf("fencelock_leases_held after the loss = %v, want 0", got)
	}
}

// The metrics follow Prometheus's naming conventions.
func TestCollector_lint(t *testing.T) {
	m := fenceprom.New(&fenceprom.Options{LockLabel: true, ResourceLabel: true})
	h, fh := m.Hooks(), m.FenceHooks()
	ctx := t.Context()
	// One series of each metric, so that the linter sees them all.
	h.AcquireAttempt(ctx, fencelock.AcquireAttemptInfo{Name: "a"})
	h.AcquireDone(ctx, fencelock.AcquireDoneInfo{Name: "a", LeaseID: "x"})
	h.RenewDone(ctx, fencelock.RenewDoneInfo{Name: "a"})
	h.LeaseLost(ctx, fencelock.LeaseLostInfo{Name: "a", LeaseID: "x"})
	h.ReleaseDone(ctx, fencelock.ReleaseDoneInfo{Name: "a"})
	fh.Accepted(ctx, fence.AccessInfo{Op: "put", Resource: "r", Fence: fence.Fence{Lock: "a", Token: 1, Lease: "x"}})
	problems, err := testutil.CollectAndLint(m)
	if err != nil {
		t.Fatalf("CollectAndLint() error = %v", err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
	// Every label set of lock "a" and resource "r", made at zero on
	// first sight: 3 attempt, 4 acquire, 3 renewal and 3 release results,
	// 5 histograms, the loss counter, the gauge; 6 ops by 3 results and 6
	// latency histograms.
	if n, want := testutil.CollectAndCount(m), 3+4+3+3+5+1+1+18+6; n != want {
		t.Errorf("CollectAndCount() = %d series, want %d", n, want)
	}
}

// An acquisition too few replicas acknowledged is counted as
// not_replicated, not as not_acquired or an error.
func TestCollector_notReplicated(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t) // no replica: WAIT is never satisfied
	col := fenceprom.New(nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	c := fencelock.New(rdb, &fencelock.Options{MinReplicas: 1, ReplicaTimeout: 50 * time.Millisecond, Hooks: col.Hooks()})
	if _, err := c.TryAcquire(t.Context(), "unreplicated"); !errors.Is(err, fencelock.ErrNotReplicated) {
		t.Fatalf("TryAcquire error = %v, want ErrNotReplicated", err)
	}
	for result, want := range map[string]float64{"not_replicated": 1, "not_acquired": 0, "error": 0, "acquired": 0} {
		if got := sample(t, reg, "fencelock_acquires_total", map[string]string{"result": result}); got != want {
			t.Errorf("fencelock_acquires_total{result=%q} = %v, want %v", result, got, want)
		}
	}
}
