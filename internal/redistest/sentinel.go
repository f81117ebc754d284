package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// MasterName is the name under which a SentinelGroup's sentinels monitor
// their master.
const MasterName = "mymaster"

// Failover timings of the deployments started here: small, so tests see
// a failover within seconds, yet large enough that a loaded 2-core
// machine does not trigger one by accident.
const (
	sentinelDownAfter = 1000 * time.Millisecond
	clusterNodeTimout = 1000 * time.Millisecond
	// setupTimeout bounds how long a deployment may take to form, and
	// failoverTimeout how long a failover may take, before the test fails:
	// a sentinel whose first attempt failed (a loaded machine) tries again
	// after twice its failover-timeout (10s), so a bound of 30s cut
	// second attempts short.
	setupTimeout    = 30 * time.Second
	failoverTimeout = 60 * time.Second
)

// SentinelGroup is a Sentinel deployment: a master with two replicas,
// watched by three sentinels (quorum 2) under MasterName. Every process
// is stopped at cleanup.
type SentinelGroup struct {
	// Servers holds the data servers: the initial master first, then its
	// replicas. Which one is master changes with failovers; see Master.
	Servers   []*Server
	Sentinels []*Server

	tls *TLS
}

// GroupOptions configure a SentinelGroup or a Cluster. A nil
// *GroupOptions starts plain servers with the default user only.
type GroupOptions struct {
	// TLS, if set, makes every process of the group talk TLS only, to
	// clients and to each other: replication, sentinels to servers and to
	// sentinels, and the cluster bus (tls-cluster). See TLS.
	TLS *TLS

	// Config holds extra redis.conf lines for every data server, e.g.
	// ACL users ("user NAME on >PASSWORD ..."). The helpers here connect
	// as the default user, which must stay unrestricted.
	Config []string

	// SentinelConfig holds extra sentinel.conf lines for every sentinel.
	SentinelConfig []string
}

// NewSentinelGroup starts a SentinelGroup and returns once every replica
// is in sync and every sentinel knows the two other sentinels and both
// replicas, so that a failover can be authorized.
func NewSentinelGroup(tb testing.TB) *SentinelGroup {
	tb.Helper()
	return StartSentinelGroup(tb, nil)
}

// StartSentinelGroup starts a SentinelGroup configured by opts, as
// NewSentinelGroup does.
func StartSentinelGroup(tb testing.TB, opts *GroupOptions) *SentinelGroup {
	tb.Helper()
	var o GroupOptions
	if opts != nil {
		o = *opts
	}
	g := &SentinelGroup{tls: o.TLS}
	master := Start(tb, &Options{TLS: o.TLS, Config: o.Config})
	g.Servers = append(g.Servers, master,
		Start(tb, &Options{TLS: o.TLS, Config: o.Config, ReplicaOf: master.Addr()}),
		Start(tb, &Options{TLS: o.TLS, Config: o.Config, ReplicaOf: master.Addr()}))
	for range 3 {
		g.Sentinels = append(g.Sentinels, Start(tb, &Options{Sentinel: true, TLS: o.TLS, Config: append([]string{
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2", MasterName, master.Port()),
			fmt.Sprintf("sentinel down-after-milliseconds %s %d", MasterName, sentinelDownAfter.Milliseconds()),
			fmt.Sprintf("sentinel failover-timeout %s %d", MasterName, (10 * time.Second).Milliseconds()),
			fmt.Sprintf("sentinel parallel-syncs %s 2", MasterName),
		}, o.SentinelConfig...)}))
	}
	WaitReplicasInSync(tb, master, 2)
	ctx := context.Background()
	for _, s := range g.Sentinels {
		rdb := redis.NewSentinelClient(s.ClientOptions())
		waitFor(tb, setupTimeout, "sentinel "+s.Addr()+" to see 2 sentinels and 2 replicas", func() (bool, string) {
			peers, err := rdb.Sentinels(ctx, MasterName).Result()
			if err != nil {
				return false, err.Error()
			}
			replicas, err := rdb.Replicas(ctx, MasterName).Result()
			if err != nil {
				return false, err.Error()
			}
			ok := 0
			for _, r := range replicas {
				if r["flags"] == "slave" && r["master-link-status"] == "ok" {
					ok++
				}
			}
			return len(peers) == 2 && ok == 2, fmt.Sprintf("%d sentinels, %d healthy replicas", len(peers), ok)
		})
		rdb.Close()
	}
	return g
}

// SentinelAddrs returns the sentinels' addresses.
func (g *SentinelGroup) SentinelAddrs() []string { return addrs(g.Sentinels) }

// Client returns a go-redis failover client for the group, closed at
// cleanup. opts may be nil; MasterName and SentinelAddrs are filled in,
// and TLSConfig too if it is nil and the group talks TLS. Requests end at
// their context's deadline (ContextTimeoutEnabled), as fencelock requires.
func (g *SentinelGroup) Client(tb testing.TB, opts *redis.FailoverOptions) *redis.Client {
	tb.Helper()
	var o redis.FailoverOptions
	if opts != nil {
		o = *opts
	}
	o.ContextTimeoutEnabled = true
	o.MasterName = MasterName
	o.SentinelAddrs = g.SentinelAddrs()
	if o.TLSConfig == nil {
		o.TLSConfig = g.tls.Config()
	}
	rdb := redis.NewFailoverClient(&o)
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// Master returns the data server that the sentinels name as master. It
// fails the test if the live sentinels disagree or name no known server.
func (g *SentinelGroup) Master(tb testing.TB) *Server {
	tb.Helper()
	addr, detail := g.agreedMaster()
	if addr == "" {
		tb.Fatalf("redistest: sentinels do not agree on a master: %s", detail)
	}
	return g.server(tb, addr)
}

// agreedMaster returns the master address every reachable sentinel
// reports, or "" and what they said.
func (g *SentinelGroup) agreedMaster() (string, string) {
	ctx := context.Background()
	var addrs []string
	for _, s := range g.Sentinels {
		o := s.ClientOptions()
		o.MaxRetries = -1
		rdb := redis.NewSentinelClient(o)
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		hp, err := rdb.GetMasterAddrByName(ctx, MasterName).Result()
		cancel()
		rdb.Close()
		if err != nil {
			addrs = append(addrs, err.Error())
			continue
		}
		addrs = append(addrs, net.JoinHostPort(hp[0], hp[1]))
	}
	for _, a := range addrs[1:] {
		if a != addrs[0] {
			return "", strings.Join(addrs, ", ")
		}
	}
	return addrs[0], strings.Join(addrs, ", ")
}

func (g *SentinelGroup) server(tb testing.TB, addr string) *Server {
	tb.Helper()
	for _, s := range g.Servers {
		if s.Addr() == addr {
			return s
		}
	}
	tb.Fatalf("redistest: %s is not a server of the group", addr)
	return nil
}

// WaitFailover waits until every sentinel names a master other than old,
// and that server answers ROLE as a master; it returns the new master.
// old is typically killed or paused by the caller beforehand.
func (g *SentinelGroup) WaitFailover(tb testing.TB, old *Server) *Server {
	tb.Helper()
	var master string
	waitFor(tb, failoverTimeout, "a failover away from "+old.Addr(), func() (bool, string) {
		addr, detail := g.agreedMaster()
		if addr == "" || addr == old.Addr() {
			return false, "sentinels report " + detail
		}
		s := g.server(tb, addr)
		role, err := s.Role()
		if err != nil || role != "master" {
			return false, fmt.Sprintf("%s: role %q, %v", addr, role, err)
		}
		master = addr
		return true, ""
	})
	return g.server(tb, master)
}

// Role returns the first element of ROLE from the plain (not TLS) server
// at addr: "master", "slave" or "sentinel".
func Role(addr string) (string, error) {
	return role(redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second}))
}

// Role returns the first element of ROLE from the server: "master",
// "slave" or "sentinel".
func (s *Server) Role() (string, error) { return role(s.client()) }

// role asks rdb for ROLE and closes it.
func role(rdb *redis.Client) (string, error) {
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	role, err := rdb.Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", err
	}
	if len(role) == 0 {
		return "", fmt.Errorf("empty ROLE reply")
	}
	s, _ := role[0].(string)
	return s, nil
}

// WaitReplicasInSync waits until master has n replicas online whose
// replication offset equals its own, and which have loaded what they
// received: every write made before the call has reached them and can be
// read there. The master's view alone is not enough: a Valkey replica in
// dual-channel sync acknowledges the stream while it still loads the
// snapshot.
func WaitReplicasInSync(tb testing.TB, master *Server, n int) {
	tb.Helper()
	rdb := redis.NewClient(master.ClientOptions())
	defer rdb.Close()
	ctx := context.Background()
	waitFor(tb, setupTimeout, fmt.Sprintf("%d replicas of %s in sync", n, master.Addr()), func() (bool, string) {
		info, err := rdb.Info(ctx, "replication").Result()
		if err != nil {
			return false, err.Error()
		}
		fields := infoFields(info)
		inSync := 0
		for i := range 16 {
			r := fields["slave"+strconv.Itoa(i)]
			if !strings.Contains(r, "state=online") || !strings.Contains(r, "offset="+fields["master_repl_offset"]+",") {
				continue
			}
			switch ours, loaded, detail := replicaLoaded(ctx, master, r); {
			case !ours:
				// A line the master has not dropped yet, of a node that
				// now replicates another master.
			case !loaded:
				return false, detail
			default:
				inSync++
			}
		}
		return inSync >= n, info
	})
}

// replicaLoaded reports whether the replica described by a master's
// "slaveN:ip=…,port=…" INFO field has its link up and no sync or load in
// progress, and whether it is master's replica at all. It is reached with
// master's client options (TLS included).
func replicaLoaded(ctx context.Context, master *Server, field string) (ours, loaded bool, detail string) {
	var ip, port string
	for kv := range strings.SplitSeq(field, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			switch k {
			case "ip":
				ip = v
			case "port":
				port = v
			}
		}
	}
	o := master.ClientOptions() // its TLS settings, if any, serve the replica too
	o.Addr, o.MaxRetries = net.JoinHostPort(ip, port), -1
	r := redis.NewClient(o)
	defer r.Close()
	info, err := r.Info(ctx, "replication", "persistence").Result()
	if err != nil {
		return true, false, err.Error()
	}
	f := infoFields(info)
	if f["master_port"] != strconv.Itoa(master.Port()) {
		return false, false, info
	}
	return true, f["master_link_status"] == "up" && f["master_sync_in_progress"] == "0" && f["loading"] == "0", info
}

// BlockReplication cuts s off from its replicas for certain: it forbids
// SYNC and PSYNC to the default user and kills the replica connections,
// so nothing written to s from now on reaches a replica until
// AllowReplication. Clients and sentinels are unaffected.
func (s *Server) BlockReplication(tb testing.TB) {
	tb.Helper()
	rdb := redis.NewClient(s.ClientOptions())
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Do(ctx, "ACL", "SETUSER", "default", "-sync", "-psync").Err(); err != nil {
		tb.Fatalf("redistest: block replication on %s: %v", s.Addr(), err)
	}
	if err := rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		tb.Fatalf("redistest: block replication on %s: %v", s.Addr(), err)
	}
	waitFor(tb, setupTimeout, "replicas of "+s.Addr()+" to disconnect", func() (bool, string) {
		info, err := rdb.Info(ctx, "replication").Result()
		if err != nil {
			return false, err.Error()
		}
		return infoFields(info)["connected_slaves"] == "0", info
	})
}

// AllowReplication undoes BlockReplication.
func (s *Server) AllowReplication(tb testing.TB) {
	tb.Helper()
	rdb := redis.NewClient(s.ClientOptions())
	defer rdb.Close()
	if err := rdb.Do(context.Background(), "ACL", "SETUSER", "default", "+sync", "+psync").Err(); err != nil {
		tb.Fatalf("redistest: allow replication on %s: %v", s.Addr(), err)
	}
}

// infoFields parses an INFO reply into its key:value fields.
func infoFields(info string) map[string]string {
	m := map[string]string{}
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// waitFor polls cond, with a growing pause between polls, until it holds;
// it fails the test with cond's last detail after timeout.
func waitFor(tb testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for pause := 10 * time.Millisecond; ; pause = min(2*pause, 200*time.Millisecond) {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: waited %v for %s; last: %s", timeout, what, detail)
		}
		time.Sleep(pause)
	}
}

// WaitFor polls cond until it returns true, and fails the test after
// timeout, naming what was awaited. It is the bounded poll that tests use
// instead of fixed sleeps.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	waitFor(tb, timeout, what, func() (bool, string) { return cond(), "" })
}
