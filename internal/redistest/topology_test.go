package redistest

import (
	"context"
	"testing"
)

// Over TLS, the failover proves TLS between all parties: replicas sync,
// sentinels find each other and vote, and clients follow, with no plain
// port anywhere.
func TestSentinelGroup_failover(t *testing.T) {
	t.Parallel()
	t.Run("plain", func(t *testing.T) { t.Parallel(); testSentinelGroupFailover(t, nil) })
	t.Run("tls", func(t *testing.T) { t.Parallel(); testSentinelGroupFailover(t, NewTLS(t)) })
}

func testSentinelGroupFailover(t *testing.T, pki *TLS) {
	g := StartSentinelGroup(t, &GroupOptions{TLS: pki})
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
	t.Run("plain", func(t *testing.T) { t.Parallel(); testClusterFailover(t, nil) })
	t.Run("tls", func(t *testing.T) { t.Parallel(); testClusterFailover(t, NewTLS(t)) })
}

func testClusterFailover(t *testing.T, pki *TLS) {
	c := StartCluster(t, &GroupOptions{TLS: pki})
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
