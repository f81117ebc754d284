package fence_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
)

// An observed store still keeps every rule of a Store.
func TestObserve_conformance(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) fence.Store {
		return fence.Observe(&fence.Memory{}, &fence.Hooks{
			Accepted: func(context.Context, fence.AccessInfo) {},
			Stale:    func(context.Context, fence.AccessInfo) {},
			Failed:   func(context.Context, fence.AccessInfo) {},
		})
	})
}

func TestObserve(t *testing.T) {
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
	s := fence.Observe(&fence.Memory{}, &fence.Hooks{Accepted: rec("accepted"), Stale: rec("stale"), Failed: rec("failed")})
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

// Without hooks, Observe adds nothing.
func TestObserve_nil(t *testing.T) {
	m := &fence.Memory{}
	if s := fence.Observe(m, nil); s != fence.Store(m) {
		t.Errorf("Observe(m, nil) = %T, want m itself", s)
	}
	if s := fence.Observe(m, &fence.Hooks{}); s != fence.Store(m) {
		t.Errorf("Observe(m, &Hooks{}) = %T, want m itself", s)
	}
}
