package fence_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
)

// A store with hooks still keeps every rule of a Store.
func TestWithHooks_conformance(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) fence.Store {
		return fence.WithHooks(&fence.Memory{}, &fence.Hooks{
			Accepted: func(context.Context, fence.AccessInfo) {},
			Stale:    func(context.Context, fence.AccessInfo) {},
			Failed:   func(context.Context, fence.AccessInfo) {},
		})
	})
}

func TestWithHooks(t *testing.T) {
	var (
		mu     sync.Mutex
		events []string
		infos  []fence.AccessInfo
	)
	rec := func(kind string) func(context.Context, fence.AccessInfo) {
		return func(_ context.Context, i fence.AccessInfo) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, kind+" "+i.Op)
			infos = append(infos, i)
		}
	}
	s := fence.WithHooks(&fence.Memory{}, &fence.Hooks{Accepted: rec("accepted"), Stale: rec("stale"), Failed: rec("failed")})
	ctx := context.Background()
	newer := fence.Fence{Lock: "orders", Token: 7, Lease: "b"}
	older := fence.Fence{Lock: "orders", Token: 5, Lease: "a"}

	if err := s.Put(ctx, "row", newer, []byte("x")); err != nil {
		t.Fatalf("Put(newer) error = %v", err)
	}
	if _, err := s.Get(ctx, "row", newer); err != nil {
		t.Fatalf("Get(newer) error = %v", err)
	}
	if err := s.Put(ctx, "row", older, []byte("y")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Put(older) error = %v, want ErrStale", err)
	}
	if err := s.Delete(ctx, "row", fence.Fence{}); !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("Delete(zero fence) error = %v, want ErrInvalid", err)
	}
	if _, _, err := s.Load(ctx, "row"); err != nil {
		t.Fatalf("Load() error = %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	want := []string{"accepted put", "accepted get", "stale put", "failed delete"}
	if len(events) != len(want) {
		t.Fatalf("events: got %q, want %q", events, want)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Errorf("event %d: got %q, want %q", i, events[i], want[i])
		}
	}
	if st := infos[2]; st.Resource != "row" || st.Fence != older || st.Current != newer || !errors.Is(st.Err, fence.ErrStale) {
		t.Errorf("stale AccessInfo: got %+v, want resource row, fence %v, current %v, ErrStale", st, older, newer)
	}
	if acc := infos[0]; acc.Err != nil || acc.Current != (fence.Fence{}) || acc.Latency < 0 {
		t.Errorf("accepted AccessInfo: got %+v, want no error, zero Current, latency >= 0", acc)
	}
}

// Without hooks, WithHooks adds nothing.
func TestWithHooks_nil(t *testing.T) {
	m := &fence.Memory{}
	if s := fence.WithHooks(m, nil); s != fence.Store(m) {
		t.Errorf("WithHooks(m, nil) = %T, want m itself", s)
	}
	if s := fence.WithHooks(m, &fence.Hooks{}); s != fence.Store(m) {
		t.Errorf("WithHooks(m, &Hooks{}) = %T, want m itself", s)
	}
}

// JoinHooks calls each Hooks' func in the order given, skipping nils,
// and returns nil when no func is set.
func TestJoinHooks(t *testing.T) {
	var calls []string
	rec := func(tag string) func(context.Context, fence.AccessInfo) {
		return func(_ context.Context, i fence.AccessInfo) { calls = append(calls, tag+" "+i.Op) }
	}
	a := &fence.Hooks{Accepted: rec("a accepted"), Stale: rec("a stale"), Failed: rec("a failed")}
	b := &fence.Hooks{Accepted: rec("b accepted"), Failed: rec("b failed")}
	j := fence.JoinHooks(a, nil, b)
	*a = fence.Hooks{} // later changes are not seen
	for _, fn := range []func(context.Context, fence.AccessInfo){j.Accepted, j.Stale, j.Failed} {
		fn(t.Context(), fence.AccessInfo{Op: "put"})
	}
	want := []string{"a accepted put", "b accepted put", "a stale put", "a failed put", "b failed put"}
	if !slices.Equal(calls, want) {
		t.Errorf("joined hooks called %q, want %q", calls, want)
	}
	if j := fence.JoinHooks(nil, &fence.Hooks{}); j != nil {
		t.Errorf("JoinHooks(nil, &Hooks{}) = %+v, want nil", j)
	}
}

// Every fenced access of a Memory behind WithHooks is reported once.
func TestWithHooks_reports(t *testing.T) {
	fencetest.RunHooks(t, func(t *testing.T, h *fence.Hooks) fence.Store {
		return fence.WithHooks(&fence.Memory{}, h)
	})
}

// Report picks the func by the error, fills Current for a stale access,
// and skips a nil Hooks and nil funcs.
func TestHooks_Report(t *testing.T) {
	var rec fencetest.Recorder
	h := rec.Hooks()
	cur := fence.Fence{Lock: "orders", Token: 7, Lease: "b"}
	f := fence.Fence{Lock: "orders", Token: 5, Lease: "a"}
	ctx := fencetest.WithMark(t.Context(), "report")
	h.Report(ctx, fence.AccessInfo{Op: "tx", Resource: "r", Fence: cur})
	h.Report(ctx, fence.AccessInfo{Op: "tx", Resource: "r", Fence: f, Err: fmt.Errorf("sqlfence: tx: %w", &fence.StaleError{Current: cur, Rejected: f})})
	h.Report(ctx, fence.AccessInfo{Op: "tx", Resource: "r", Fence: f, Err: context.Canceled})
	fencetest.CheckReports(t, rec.Reports(), ctx, "r",
		fencetest.Want{Kind: "accepted", Op: "tx", Fence: cur},
		fencetest.Want{Kind: "stale", Op: "tx", Fence: f, Current: cur},
		fencetest.Want{Kind: "failed", Op: "tx", Fence: f, Err: context.Canceled},
	)
	var nilHooks *fence.Hooks
	nilHooks.Report(ctx, fence.AccessInfo{Op: "tx"})
	(&fence.Hooks{}).Report(ctx, fence.AccessInfo{Op: "tx"})
}
