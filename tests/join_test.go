package tests

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
)

// hookFuncs sets every func field of the Hooks h points to (of type
// fencelock.Hooks or fence.Hooks) to one that appends "tag field" to
// calls, unless skip names the field.
func hookFuncs(h any, tag string, calls *[]string, skip string) {
	v := reflect.ValueOf(h).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Name == skip {
			continue
		}
		name := f.Name
		v.Field(i).Set(reflect.MakeFunc(f.Type, func([]reflect.Value) []reflect.Value {
			*calls = append(*calls, tag+" "+name)
			return nil
		}))
	}
}

// callHooks calls every non-nil func field of the Hooks h points to, in
// field order, with a context and the zero info; it returns the number of
// fields.
func callHooks(t *testing.T, h any) int {
	t.Helper()
	v := reflect.ValueOf(h).Elem()
	for i := range v.NumField() {
		fn := v.Field(i)
		if fn.Kind() != reflect.Func {
			t.Fatalf("field %s is a %v, want a func", v.Type().Field(i).Name, fn.Kind())
		}
		if fn.IsNil() {
			continue
		}
		fn.Call([]reflect.Value{reflect.ValueOf(t.Context()), reflect.Zero(fn.Type().In(1))})
	}
	return v.NumField()
}

// JoinHooks calls each field of each Hooks in the order given, skips nil
// Hooks and nil fields, and reads the fields when called. Every field of
// Hooks is covered, those added later too.
func TestJoinHooks(t *testing.T) {
	t.Parallel()
	var calls []string
	a, b, c := &fencelock.Hooks{}, &fencelock.Hooks{}, &fencelock.Hooks{}
	hookFuncs(a, "a", &calls, "")
	hookFuncs(b, "b", &calls, "RenewDone") // b leaves one event unset
	hookFuncs(c, "c", &calls, "")
	j := fencelock.JoinHooks(nil, a, b, nil, c)
	*a = fencelock.Hooks{} // later changes are not seen
	n := callHooks(t, j)
	var want []string
	for _, f := range reflect.VisibleFields(reflect.TypeFor[fencelock.Hooks]()) {
		for _, tag := range []string{"a", "b", "c"} {
			if tag != "b" || f.Name != "RenewDone" {
				want = append(want, tag+" "+f.Name)
			}
		}
	}
	if !slices.Equal(calls, want) || n != 5 {
		t.Errorf("joined hooks called %q (of %d fields), want %q", calls, n, want)
	}

	if j := fencelock.JoinHooks(); j != nil {
		t.Errorf("JoinHooks() = %+v, want nil", j)
	}
	if j := fencelock.JoinHooks(nil, &fencelock.Hooks{}, nil); j != nil {
		t.Errorf("JoinHooks(nil, &Hooks{}, nil) = %+v, want nil (no event wanted)", j)
	}
	calls = nil
	only := &fencelock.Hooks{}
	hookFuncs(only, "only", &calls, "")
	callHooks(t, fencelock.JoinHooks(nil, only))
	if len(calls) != n {
		t.Errorf("JoinHooks(nil, h) called %q, want each of h's %d fields", calls, n)
	}
}

// Joined hooks given to a Client each see every event of a lease.
func TestJoinHooks_client(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	first, second := newHookLog(), newHookLog()
	locks := newClient(t, rdb, &fencelock.Options{TTL: time.Second, Hooks: fencelock.JoinHooks(first.hooks(), nil, second.hooks())})
	l, err := locks.TryAcquire(t.Context(), "joined")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*hookLog{first, second} {
		h.mu.Lock()
		got := []int{len(h.attempts), len(h.acquires), len(h.renews), len(h.releases)}
		h.mu.Unlock()
		if want := []int{1, 1, 1, 1}; !slices.Equal(got, want) {
			t.Errorf("attempts, acquires, renewals, releases seen = %v, want %v", got, want)
		}
	}
}
