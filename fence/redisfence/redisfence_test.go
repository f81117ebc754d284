package redisfence_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	"github.com/fencelock/fencelock/fence/redisfence"
	"github.com/fencelock/fencelock/internal/redistest"
)

// newStores returns a newStore for fencetest.Run that gives each subtest
// its own key prefix on rdb.
func newStores(rdb redis.Scripter) func(t *testing.T) fence.Store {
	return func(t *testing.T) fence.Store {
		return redisfence.New(rdb, &redisfence.Options{Prefix: t.Name() + ":"})
	}
}

func TestStore(t *testing.T) {
	fencetest.Run(t, newStores(redistest.New(t).Client(t)))
}

// Every fenced access of a redisfence Store behind fence.WithHooks is
// reported once, WRONGTYPE failures included.
func TestStore_hooks(t *testing.T) {
	rdb := redistest.New(t).Client(t)
	fencetest.RunHooks(t, func(t *testing.T, h *fence.Hooks) fence.Store {
		return fence.WithHooks(redisfence.New(rdb, &redisfence.Options{Prefix: t.Name() + ":"}), h)
	})
	var rec fencetest.Recorder
	s := fence.WithHooks(redisfence.New(rdb, &redisfence.Options{Prefix: "wrongtype:"}), rec.Hooks())
	if err := rdb.LPush(t.Context(), "{wrongtype:r}", "x").Err(); err != nil {
		t.Fatal(err)
	}
	f := fence.Fence{Lock: "orders", Token: 1, Lease: "a"}
	ctx := fencetest.WithMark(t.Context(), "wrongtype")
	if err := s.Put(ctx, "r", f, []byte("v")); !errors.Is(err, redisfence.ErrWrongType) {
		t.Fatalf("Put on a list = %v, want ErrWrongType", err)
	}
	fencetest.CheckReports(t, rec.Reports(), ctx, "r", fencetest.Want{Kind: "failed", Op: "put", Fence: f, Err: redisfence.ErrWrongType})
}

// TestStore_cluster runs the suite on a one-node Cluster, where a script
// whose keys are in two slots fails with CROSSSLOT: it shows that the
// hash tag keeps both keys of every resource name in one slot.
func TestStore_cluster(t *testing.T) {
	srv := redistest.Start(t, &redistest.Options{Config: []string{
		"cluster-enabled yes",
		"cluster-announce-ip 127.0.0.1",
	}})
	node := srv.Client(t)
	if err := node.Do(t.Context(), "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatalf("CLUSTER ADDSLOTSRANGE 0 16383: %v", err)
	}
	// A node takes its new slots into service on its next cron tick.
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		info, err := node.ClusterInfo(t.Context()).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not ok after 10s: %q, %v", info, err)
		}
		<-tick.C
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr()}})
	t.Cleanup(func() { rdb.Close() })
	fencetest.Run(t, newStores(rdb))
}

func TestStore_TTL(t *testing.T) {
	rdb := redistest.New(t).Client(t)
	s := redisfence.New(rdb, &redisfence.Options{TTL: time.Minute})
	f := fence.Fence{Lock: "orders", Token: 1, Lease: "a"}
	if err := s.Put(t.Context(), "r", f, []byte("v")); err != nil {
		t.Fatalf("Put = %v, want nil", err)
	}
	if _, err := s.Get(t.Context(), "r", fence.Fence{Lock: "orders", Token: 2, Lease: "b"}); err != nil {
		t.Fatalf("Get = %v, want nil", err)
	}
	if ttl := rdb.PTTL(t.Context(), "{fence:r}").Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("PTTL of the value key = %v, want in (0, 1m]", ttl)
	}
	if ttl := rdb.PTTL(t.Context(), "{fence:r}:fence").Val(); ttl != -1 {
		t.Errorf("PTTL of the fence key = %v, want -1 (no expiry)", ttl)
	}
	// What expiry leaves behind: no value, the fence intact.
	rdb.Del(t.Context(), "{fence:r}")
	err := s.Put(t.Context(), "r", f, []byte("again"))
	if !errors.Is(err, fence.ErrStale) {
		t.Errorf("Put with the old fence after the value expired = %v, want ErrStale", err)
	}
}

func TestStore_wrongType(t *testing.T) {
	rdb := redistest.New(t).Client(t)
	s := redisfence.New(rdb, nil)
	ctx := t.Context()
	rdb.RPush(ctx, "{fence:list}", "x")
	rdb.Set(ctx, "{fence:str}:fence", "x", 0)
	f := fence.Fence{Lock: "orders", Token: 1, Lease: "a"}
	for _, res := range []string{"list", "str"} {
		if err := s.Put(ctx, res, f, []byte("v")); !errors.Is(err, redisfence.ErrWrongType) {
			t.Errorf("Put(%q) = %v, want ErrWrongType", res, err)
		}
		if _, err := s.Get(ctx, res, f); !errors.Is(err, redisfence.ErrWrongType) {
			t.Errorf("Get(%q) = %v, want ErrWrongType", res, err)
		}
		if err := s.Delete(ctx, res, f); !errors.Is(err, redisfence.ErrWrongType) {
			t.Errorf("Delete(%q) = %v, want ErrWrongType", res, err)
		}
		if _, _, err := s.Load(ctx, res); !errors.Is(err, redisfence.ErrWrongType) {
			t.Errorf("Load(%q) = %v, want ErrWrongType", res, err)
		}
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil || len(keys) != 2 {
		t.Errorf("KEYS * = %q, %v; want only the two keys the test made", keys, err)
	}
	if got := rdb.LRange(ctx, "{fence:list}", 0, -1).Val(); len(got) != 1 || got[0] != "x" {
		t.Errorf("LRANGE of the list = %q, want [x]", got)
	}
	if got := rdb.Get(ctx, "{fence:str}:fence").Val(); got != "x" {
		t.Errorf("GET of the string = %q, want x", got)
	}
}

// TestStore_scriptFlush shows that a server that lost its script cache
// (a restart, a failover, SCRIPT FLUSH) still works: Script.Run falls back
// from EVALSHA to EVAL on NOSCRIPT.
func TestStore_scriptFlush(t *testing.T) {
	rdb := redistest.New(t).Client(t)
	s := redisfence.New(rdb, nil)
	for token := range int64(3) {
		if err := rdb.ScriptFlush(t.Context()).Err(); err != nil {
			t.Fatalf("SCRIPT FLUSH: %v", err)
		}
		f := fence.Fence{Lock: "orders", Token: token + 1, Lease: "a"}
		if err := s.Put(t.Context(), "r", f, []byte("v")); err != nil {
			t.Errorf("Put after SCRIPT FLUSH = %v, want nil", err)
		}
	}
}

func TestStore_unreachable(t *testing.T) {
	srv := redistest.New(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	s := redisfence.New(rdb, nil)
	srv.Kill(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	err := s.Put(ctx, "r", fence.Fence{Lock: "orders", Token: 1, Lease: "a"}, nil)
	if err == nil || errors.Is(err, fence.ErrStale) || errors.Is(err, fence.ErrInvalid) {
		t.Errorf("Put to a killed server = %v, want a connection error", err)
	}
}

// TestNew_invalid shows the constructor's error policy, the library's:
// New never fails, and every call on a Store made from invalid arguments
// returns an error wrapping fence.ErrInvalid and sends nothing.
func TestNew_invalid(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.Client(t)
	f := fence.Fence{Lock: "orders", Token: 1, Lease: "a"}
	for name, s := range map[string]*redisfence.Store{
		"prefix }x":    redisfence.New(rdb, &redisfence.Options{Prefix: "}x"}),
		"prefix }":     redisfence.New(rdb, &redisfence.Options{Prefix: "}"}),
		"negative TTL": redisfence.New(rdb, &redisfence.Options{TTL: -time.Second}),
		"nil client":   redisfence.New(nil, nil),
		"typed nil":    redisfence.New((*redis.Client)(nil), nil),
	} {
		_, _, loadErr := s.Load(t.Context(), "r")
		_, getErr := s.Get(t.Context(), "r", f)
		for op, err := range map[string]error{
			"Put":    s.Put(t.Context(), "r", f, []byte("v")),
			"Get":    getErr,
			"Delete": s.Delete(t.Context(), "r", f),
			"Load":   loadErr,
		} {
			if !errors.Is(err, fence.ErrInvalid) {
				t.Errorf("%s: %s = %v, want ErrInvalid", name, op, err)
			}
		}
	}
	if keys, err := rdb.Keys(t.Context(), "*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("KEYS * = %q, %v; want none: invalid Stores must send nothing", keys, err)
	}
}

func BenchmarkPut(b *testing.B) {
	s := redisfence.New(redistest.New(b).Client(b), nil)
	value := []byte("some value of modest size")
	b.ReportAllocs()
	var token int64
	for b.Loop() {
		token++
		if err := s.Put(b.Context(), "orders:42", fence.Fence{Lock: "orders", Token: token, Lease: "k3J9x"}, value); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzTokenOrder(f *testing.F) {
	fencetest.FuzzTokenOrder(f, redisfence.New(redistest.New(f).Client(f), nil))
}
