package redistest

import (
	"context"
	"testing"
)

func TestSentinelGroup_failover(t *testing.T) {
	t.Parallel()
	g := NewSentinelGroup(t)
	old := g.Master(t)
	if old != g.Servers[0] {
		t.Fatalf("master = %s, want the initial %s", old.Addr(), g.Servers[0].Addr())
	}
	rdb := g.Client(t, nil)
	ctx := context.Background()
	if err := rdb.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	old.BlockReplication(t)
	if err := rdb.Set(ctx, "k", "lost", 0).Err(); err != nil {
		t.Fatal(err)
	}
	old.Kill(t)
	m := g.WaitFailover(t, old)
	if got, err := m.Client(t).Get(ctx, "k").Result(); err != nil || got != "before" {
		t.Errorf("GET k on the new master = %q, %v; want %q: the write after BlockReplication must be lost", got, err, "before")
	}
}

func TestCluster_failover(t *testing.T) {
	t.Parallel()
	c := NewCluster(t)
	rdb := c.Client(t, nil)
	ctx := context.Background()
	const key = "{x}k"
	if err := rdb.Set(ctx, key, "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	old := c.MasterOf(t, key)
	WaitReplicasInSync(t, old, 1)
	old.BlockReplication(t)
	if err := rdb.Set(ctx, key, "lost", 0).Err(); err != nil {
		t.Fatal(err)
	}
	old.Kill(t)
	m := c.WaitFailover(t, key, old)
	if got, err := m.Client(t).Get(ctx, key).Result(); err != nil || got != "before" {
		t.Errorf("GET %s on the new master = %q, %v; want %q", key, got, err, "before")
	}
	if got, err := rdb.ClusterKeySlot(ctx, key).Result(); err != nil || int(got) != Slot(key) {
		t.Errorf("CLUSTER KEYSLOT %s = %d, %v; want Slot = %d", key, got, err, Slot(key))
	}
}
