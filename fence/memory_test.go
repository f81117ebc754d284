package fence_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
)

func TestMemory(t *testing.T) {
	fencetest.Run(t, func(*testing.T) fence.Store {
		var m fence.Memory // the zero value is ready to use
		return &m
	})
}

func TestMemory_copiesValues(t *testing.T) {
	var m fence.Memory
	f := fence.Fence{Lock: "l", Token: 1, Lease: "a"}
	in := []byte("abc")
	if err := m.Put(t.Context(), "r", f, in); err != nil {
		t.Fatalf("Put = %v, want nil", err)
	}
	in[0] = 'X'
	out, err := m.Get(t.Context(), "r", f)
	if err != nil || string(out) != "abc" {
		t.Fatalf("Get = %q, %v; want %q, nil", out, err, "abc")
	}
	out[1] = 'Y'
	if got, _, _ := m.Load(t.Context(), "r"); string(got) != "abc" {
		t.Errorf("Load after changing the caller's slices = %q, want %q", got, "abc")
	}
}

func BenchmarkPut(b *testing.B) {
	var m fence.Memory
	value := []byte("some value of modest size")
	b.ReportAllocs()
	var token int64
	for b.Loop() {
		token++
		if err := m.Put(b.Context(), "orders:42", fence.Fence{Lock: "orders", Token: token, Lease: "k3J9x"}, value); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzTokenOrder(f *testing.F) {
	fencetest.FuzzTokenOrder(f, &fence.Memory{})
}

// TestMemory_concurrentRounds repeats the concurrent load: a Memory that
// let go of its mutex between the check and the record would be seen
// only in the rare round where another writer takes the mutex in that
// instant.
func TestMemory_concurrentRounds(t *testing.T) {
	var m fence.Memory
	for range 200 {
		fencetest.Concurrent(t, &m)
		if t.Failed() {
			return
		}
	}
}

// Memory's errors name the package, the access and the resource, as
// every adapter's do ("redisfence: put \"r\": ..."), context errors too.
func TestMemory_errorPrefix(t *testing.T) {
	var m fence.Memory
	ctx := t.Context()
	newer := fence.Fence{Lock: "l", Token: 2, Lease: "b"}
	old := fence.Fence{Lock: "l", Token: 1, Lease: "a"}
	if err := m.Put(ctx, "r", newer, nil); err != nil {
		t.Fatal(err)
	}
	_, getErr := m.Get(ctx, "r", old)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, _, loadErr := m.Load(canceled, "r")
	for _, tc := range []struct {
		err  error
		want string
		is   error
	}{
		{m.Put(ctx, "r", old, nil), `fence: put "r": fence: stale token`, fence.ErrStale},
		{getErr, `fence: get "r": fence: stale token`, fence.ErrStale},
		{m.Delete(ctx, "r", old), `fence: delete "r": fence: stale token`, fence.ErrStale},
		{m.Put(canceled, "r", newer, nil), `fence: put "r": context canceled`, context.Canceled},
		{loadErr, `fence: load "r": context canceled`, context.Canceled},
	} {
		if tc.err == nil || !strings.HasPrefix(tc.err.Error(), tc.want) || !errors.Is(tc.err, tc.is) {
			t.Errorf("error %v, want one starting %q and wrapping %v", tc.err, tc.want, tc.is)
		}
	}
}
