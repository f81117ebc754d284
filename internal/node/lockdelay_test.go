package node

import (
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/fencelock/fencelock/transport"
)

// The delay key refuses every owner but its own: a retried request of
// the attempt that wrote it (its lock expired meanwhile) takes the lock;
// another owner is refused with the key's remaining TTL as its wait.
func TestLockDelay_ownerOnly(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	cfg := testConfig()
	n := New(transport.GoRedis(rdb), cfg)
	rdb.Set(ctx, "fencelock:{own}:delay", "owner-a", 30*time.Second)
	var r Ref
	cfg.SetRef(&r, Lock, "own", "owner-b")
	token, held, err := n.Acquire(ctx, &r)
	if err != nil || token != 0 {
		t.Fatalf("acquire by another owner = %d, %v, want refused", token, err)
	}
	if held <= 29*time.Second || held > 30*time.Second {
		t.Errorf("wait %v, want the delay key's PTTL (about 30s)", held)
	}
	cfg.SetRef(&r, Lock, "own", "owner-a")
	if token, _, err = n.Acquire(ctx, &r); err != nil || token <= 0 {
		t.Fatalf("acquire by the delay key's own owner = %d, %v, want a token", token, err)
	}
}
