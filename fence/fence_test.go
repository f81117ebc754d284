package fence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

func TestCheck(t *testing.T) {
	cur := fence.Fence{Lock: "orders", Token: 10, Lease: "a"}
	tests := []struct {
		name    string
		current fence.Fence
		f       fence.Fence
		want    error
	}{
		{"first", fence.Fence{}, fence.Fence{Lock: "orders", Token: 1, Lease: "a"}, nil},
		{"newer", cur, fence.Fence{Lock: "orders", Token: 11, Lease: "b"}, nil},
		{"same lease", cur, cur, nil},
		{"other lease", cur, fence.Fence{Lock: "orders", Token: 10, Lease: "b"}, fence.ErrStale},
		{"older", cur, fence.Fence{Lock: "orders", Token: 9, Lease: "a"}, fence.ErrStale},
		{"other lock", cur, fence.Fence{Lock: "invoices", Token: 99, Lease: "a"}, fence.ErrStale},
		{"zero token", cur, fence.Fence{Lock: "orders", Token: 0, Lease: "a"}, fence.ErrInvalid},
		{"negative token", fence.Fence{}, fence.Fence{Lock: "orders", Token: -1, Lease: "a"}, fence.ErrInvalid},
		{"empty lock", fence.Fence{}, fence.Fence{Token: 1, Lease: "a"}, fence.ErrInvalid},
		{"empty lease", fence.Fence{}, fence.Fence{Lock: "orders", Token: 1}, fence.ErrInvalid},
		{"control byte", fence.Fence{}, fence.Fence{Lock: "orders\t", Token: 1, Lease: "a"}, fence.ErrInvalid},
		{"non-ASCII", fence.Fence{}, fence.Fence{Lock: "orders", Token: 1, Lease: "é"}, fence.ErrInvalid},
		{"DEL", fence.Fence{}, fence.Fence{Lock: "orders", Token: 1, Lease: "\x7f"}, fence.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := fence.Check(tt.current, tt.f)
			if tt.want == nil && err != nil || !errors.Is(err, tt.want) {
				t.Errorf("Check(%v, %v) = %v, want %v", tt.current, tt.f, err, tt.want)
			}
		})
	}
}

func TestStaleError(t *testing.T) {
	cur := fence.Fence{Lock: "orders", Token: 1764431234567890, Lease: "a"}
	tests := []struct {
		rejected fence.Fence
		want     string
	}{
		{fence.Fence{Lock: "orders", Token: 5, Lease: "b"}, "token 5 is older than current token 1764431234567890"},
		{fence.Fence{Lock: "orders", Token: cur.Token, Lease: "b"}, `belongs to lease "a", not "b"`},
		{fence.Fence{Lock: "invoices", Token: 7, Lease: "b"}, `fenced by lock "orders" (current token 1764431234567890), not "invoices"`},
		// A job and a worker that fence one resource under different lock
		// names are refused on every write: the error names the fix.
		{fence.Fence{Lock: "invoices", Token: 7, Lease: "b"}, `bound to the first lock name that writes it: have every writer take lock "orders"`},
	}
	for _, tt := range tests {
		err := fence.Check(cur, tt.rejected)
		var se *fence.StaleError
		if !errors.As(err, &se) || se.Current != cur || se.Rejected != tt.rejected {
			t.Errorf("Check(%v, %v) = %#v, want *StaleError{%v, %v}", cur, tt.rejected, err, cur, tt.rejected)
			continue
		}
		if !strings.HasPrefix(err.Error(), "fence: stale token: ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Check(%v, %v).Error() = %q, want it to contain %q", cur, tt.rejected, err, tt.want)
		}
	}
}
