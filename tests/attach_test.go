package tests

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
)

func TestClient_Attach(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	ctx := t.Context()
	locks := newClient(t, rdb, &fencelock.Options{TTL: 2 * time.Second})

	l, err := locks.TryAcquire(ctx, "attach")
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	defer l.Release(ctx)

	// Another process rebuilds the lease from what the first printed.
	other := newClient(t, rdb, &fencelock.Options{TTL: 5 * time.Second, RenewInterval: -1})
	a, err := other.Attach(l.Name(), l.Secret(), l.Token())
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	if got, want := a.ID(), l.ID(); got != want {
		t.Errorf("Attach(...).ID() = %q, want %q", got, want)
	}
	if got, want := a.Fence(), l.Fence(); got != want {
		t.Errorf("Attach(...).Fence() = %+v, want %+v", got, want)
	}
	if h, err := other.Holder(ctx, l.Name()); err != nil || h.LeaseID != l.ID() {
		t.Errorf("Holder = %+v, %v; want lease %q", h, err, l.ID())
	}

	if err := a.Renew(ctx); err != nil {
		t.Fatalf("attached Renew: %v", err)
	}
	// The attached client's TTL applies: the renewal set 5s.
	if pttl := rdb.PTTL(ctx, "fencelock:{attach}").Val(); pttl <= 2*time.Second {
		t.Errorf("PTTL after attached Renew = %v, want > 2s", pttl)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("attached Release: %v", err)
	}
	if n := rdb.Exists(ctx, "fencelock:{attach}").Val(); n != 0 {
		t.Errorf("EXISTS lock after attached Release = %d, want 0", n)
	}
	// The original holder learns of it.
	if err := l.Renew(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("original Renew after attached Release = %v, want ErrLeaseLost", err)
	}
}

func TestClient_Attach_wrongSecret(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	ctx := t.Context()
	locks := newClient(t, rdb, nil)
	l, err := locks.TryAcquire(ctx, "attach")
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	defer l.Release(ctx)

	a, err := locks.Attach("attach", "not-the-secret", l.Token())
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	if err := a.Renew(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("Renew with a wrong secret = %v, want ErrLeaseLost", err)
	}
	if err := a.Release(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("Release with a wrong secret = %v, want ErrLeaseLost", err)
	}
	if got := rdb.Get(ctx, "fencelock:{attach}").Val(); got != l.Secret() {
		t.Errorf("lock value after a wrong-secret Release changed; want the holder's untouched")
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("holder Release: %v", err)
	}
}

func TestClient_Attach_invalid(t *testing.T) {
	t.Parallel()
	locks := newClient(t, redistest.New(t).Client(t), nil)
	for _, tc := range []struct {
		name, secret string
		token        int64
	}{
		{"", "s", 1},
		{"a{b}", "s", 1},
		{"ok", "", 1},
		{"ok", strings.Repeat("s", fencelock.MaxSecretLen+1), 1},
		{"ok", "s", 0},
		{"ok", "s", -5},
	} {
		if _, err := locks.Attach(tc.name, tc.secret, tc.token); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("Attach(%q, %d-byte secret, %d) = %v, want ErrInvalid", tc.name, len(tc.secret), tc.token, err)
		}
	}
}
