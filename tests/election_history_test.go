package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
)

// An election's history keeps its last 64 changes and expires
// TokenRetention (plus a TTL) after the last, when every change is an
// election: Campaign writes it as Proclaim does.
func TestElection_campaignHistoryBounds(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	rdb := srv.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	opts := fencelock.Options{TTL: 10 * time.Second, TokenRetention: time.Minute, RenewInterval: -1}
	e := newClient(t, srv.Client(t), &opts).Election("camp-hist")
	const lock, key, campaigns = "fencelock:{camp-hist}", "fencelock:{camp-hist}:history", 70
	var leases []*fencelock.Lease
	defer func() {
		for _, l := range leases {
			l.Release(ctx)
		}
	}()
	for i := range campaigns {
		l, err := e.Campaign(ctx, fmt.Sprintf("v%d", i))
		if err != nil {
			t.Fatalf("Campaign #%d error = %v", i, err)
		}
		leases = append(leases, l)
		// The lock taken from the leader, as by its expiry: no
		// resignation writes the history.
		if i < campaigns-1 {
			if err := rdb.Del(ctx, lock).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	entries, err := rdb.XRange(ctx, key, "-", "+").Result()
	if err != nil || len(entries) != 64 {
		t.Fatalf("history after %d campaigns: %d entries, %v; want 64", campaigns, len(entries), err)
	}
	for _, m := range entries {
		if m.Values["kind"] != "elected" {
			t.Fatalf("history entry %v, want only elections", m.Values)
		}
	}
	if got, want := entries[63].Values["value"], fmt.Sprintf("v%d", campaigns-1); got != want {
		t.Errorf("last history entry's value %v, want %q", got, want)
	}
	ttl, err := rdb.PTTL(ctx, key).Result()
	if max := opts.TokenRetention + opts.TTL; err != nil || ttl <= opts.TokenRetention/2 || ttl > max {
		t.Errorf("PTTL %s = %v, %v; want in (%v, %v]", key, ttl, err, opts.TokenRetention/2, max)
	}
}
