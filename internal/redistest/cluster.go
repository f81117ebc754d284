package redistest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of three masters, each with one replica,
// every node a Server on its own port. The slots are split evenly among
// the masters. Every process is stopped at cleanup.
type Cluster struct {
	// Servers holds the nodes: the three initial masters, then their
	// replicas in the same order. Roles change with failovers; see
	// MasterOf.
	Servers []*Server

	tls *TLS
}

// NewCluster starts a Cluster and returns once every node reports
// cluster_state:ok, knows all six nodes, and every replica is in sync.
func NewCluster(tb testing.TB) *Cluster {
	tb.Helper()
	return StartCluster(tb, nil)
}

// StartCluster starts a Cluster configured by opts, as NewCluster does
// (GroupOptions.SentinelConfig does not apply). With TLS, the cluster bus
// talks TLS too (tls-cluster yes), and the nodes announce their TLS ports.
func StartCluster(tb testing.TB, opts *GroupOptions) *Cluster {
	tb.Helper()
	var o GroupOptions
	if opts != nil {
		o = *opts
	}
	c := &Cluster{Servers: make([]*Server, 6), tls: o.TLS}
	config := []string{
		"cluster-enabled yes",
		"cluster-config-file nodes.conf",
		"cluster-node-timeout " + strconv.FormatInt(clusterNodeTimout.Milliseconds(), 10),
		// A replica cut off from its master for a while still
		// takes over: tests cut replication on purpose.
		"cluster-replica-validity-factor 0",
		"cluster-allow-replica-migration no",
	}
	if o.TLS != nil {
		config = append(config, "tls-cluster yes")
	}
	config = append(config, o.Config...)
	var wg sync.WaitGroup
	for i := range c.Servers {
		wg.Go(func() {
			c.Servers[i] = Start(tb, &Options{TLS: o.TLS, Config: config})
		})
	}
	wg.Wait()
	if tb.Failed() {
		tb.FailNow()
	}
	ctx := context.Background()
	clients := make([]*redis.Client, len(c.Servers))
	ids := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		clients[i] = redis.NewClient(s.ClientOptions())
		defer clients[i].Close()
		id, err := clients[i].Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			tb.Fatalf("redistest: CLUSTER MYID on %s: %v", s.Addr(), err)
		}
		ids[i] = id
	}
	const slots = 16384
	for i := range 3 {
		lo, hi := i*slots/3, (i+1)*slots/3-1
		must(tb, clients[i].Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err())
		// Distinct epochs up front spare the nodes the collision dance.
		must(tb, clients[i].Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err())
	}
	for i := 1; i < len(c.Servers); i++ {
		must(tb, clients[i].ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(c.Servers[0].Port())).Err())
	}
	for i, rdb := range clients {
		waitFor(tb, setupTimeout, "node "+c.Servers[i].Addr()+" to know 6 nodes", func() (bool, string) {
			nodes, err := rdb.ClusterNodes(ctx).Result()
			if err != nil {
				return false, err.Error()
			}
			return strings.Count(strings.TrimSpace(nodes), "\n")+1 == 6 && !strings.Contains(nodes, "handshake"), nodes
		})
	}
	for i := 3; i < 6; i++ {
		must(tb, clients[i].Do(ctx, "CLUSTER", "REPLICATE", ids[i-3]).Err())
	}
	for i := range 3 {
		WaitReplicasInSync(tb, c.Servers[i], 1)
	}
	c.WaitHealthy(tb)
	return c
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
}

// Addrs returns every node's address.
func (c *Cluster) Addrs() []string { return addrs(c.Servers) }

// Client returns a go-redis cluster client, closed at cleanup. opts may be
// nil; Addrs is filled in, and TLSConfig too if it is nil and the cluster
// talks TLS. Requests end at their context's deadline
// (ContextTimeoutEnabled), as fencelock requires.
func (c *Cluster) Client(tb testing.TB, opts *redis.ClusterOptions) *redis.ClusterClient {
	tb.Helper()
	var o redis.ClusterOptions
	if opts != nil {
		o = *opts
	}
	o.ContextTimeoutEnabled = true
	o.Addrs = c.Addrs()
	if o.TLSConfig == nil {
		o.TLSConfig = c.tls.Config()
	}
	rdb := redis.NewClusterClient(&o)
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// WaitHealthy waits until every running node reports cluster_state:ok
// and all of them agree which node serves each slot.
func (c *Cluster) WaitHealthy(tb testing.TB) {
	tb.Helper()
	waitFor(tb, setupTimeout, "cluster_state:ok on every running node", func() (bool, string) {
		var owners string
		for _, s := range c.running() {
			info, slots, err := clusterView(s)
			if err != nil {
				return false, s.Addr() + ": " + err.Error()
			}
			if st := infoFields(info)["cluster_state"]; st != "ok" {
				return false, s.Addr() + ": cluster_state " + st
			}
			if owners == "" {
				owners = slots
			} else if slots != owners {
				return false, "nodes disagree on slot owners: " + owners + " vs " + slots
			}
		}
		return true, ""
	})
}

// MasterOf returns the node that serves key's slot as a running master,
// as every running node agrees; it waits (bounded) for a failover in
// progress to settle.
func (c *Cluster) MasterOf(tb testing.TB, key string) *Server {
	tb.Helper()
	slot := Slot(key)
	var master *Server
	waitFor(tb, failoverTimeout, fmt.Sprintf("a running master for slot %d", slot), func() (bool, string) {
		m, detail := c.masterOf(slot)
		master = m
		return m != nil, detail
	})
	return master
}

// ReplicaOf returns a running node that replicates master.
func (c *Cluster) ReplicaOf(tb testing.TB, master *Server) *Server {
	tb.Helper()
	for _, s := range c.running() {
		rdb := redis.NewClient(s.ClientOptions())
		info, err := rdb.Info(context.Background(), "replication").Result()
		rdb.Close()
		if err == nil && infoFields(info)["master_port"] == strconv.Itoa(master.Port()) {
			return s
		}
	}
	tb.Fatalf("redistest: no running replica of %s", master.Addr())
	return nil
}

// WaitFailover waits until a running node other than old serves key's
// slot as master and the cluster is healthy again; it returns that node.
func (c *Cluster) WaitFailover(tb testing.TB, key string, old *Server) *Server {
	tb.Helper()
	slot := Slot(key)
	var master *Server
	waitFor(tb, failoverTimeout, fmt.Sprintf("a failover of slot %d away from %s", slot, old.Addr()), func() (bool, string) {
		m, detail := c.masterOf(slot)
		if m == nil || m == old {
			return false, detail
		}
		master = m
		return true, ""
	})
	c.WaitHealthy(tb)
	return master
}

func (c *Cluster) masterOf(slot int) (*Server, string) {
	var found *Server
	for _, s := range c.running() {
		rdb := s.client()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ranges, err := slotOwners(ctx, rdb)
		cancel()
		rdb.Close()
		if err != nil {
			return nil, s.Addr() + ": " + err.Error()
		}
		var owner string
		for _, r := range ranges {
			if r.start <= slot && slot <= r.end {
				owner = r.master
			}
		}
		m := c.byAddr(owner)
		if m == nil || (found != nil && m != found) {
			return nil, fmt.Sprintf("%s names %q as master", s.Addr(), owner)
		}
		found = m
	}
	if found == nil {
		return nil, "master not running"
	}
	if role, err := found.Role(); err != nil || role != "master" {
		return nil, fmt.Sprintf("%s: role %q, %v", found.Addr(), role, err)
	}
	return found, ""
}

func (c *Cluster) byAddr(addr string) *Server {
	for _, s := range c.Servers {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

func (c *Cluster) running() []*Server {
	var live []*Server
	for _, s := range c.Servers {
		if s.running() {
			live = append(live, s)
		}
	}
	return live
}

// running reports whether the process is started and answers PING
// within half a second: killed, stopped and paused nodes do not count.
func (s *Server) running() bool {
	s.mu.Lock()
	started := s.proc != nil
	s.mu.Unlock()
	if !started {
		return false
	}
	o := s.ClientOptions()
	o.MaxRetries, o.DialTimeout = -1, 500*time.Millisecond
	rdb := redis.NewClient(o)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	return rdb.Ping(ctx).Err() == nil
}

// clusterView returns a node's CLUSTER INFO and a canonical text of its
// slot owners.
func clusterView(s *Server) (string, string, error) {
	rdb := s.client()
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := rdb.ClusterInfo(ctx).Result()
	if err != nil {
		return "", "", err
	}
	ranges, err := slotOwners(ctx, rdb)
	if err != nil {
		return "", "", err
	}
	owners := make([]string, 0, len(ranges))
	for _, r := range ranges {
		owners = append(owners, fmt.Sprintf("%d-%d:%s", r.start, r.end, r.master))
	}
	slices.Sort(owners)
	return info, strings.Join(owners, ","), nil
}

// slotRange is a range of slots and the address of its master.
type slotRange struct {
	start, end int
	master     string
}

// slotOwners returns, from CLUSTER SHARDS, which master each slot range
// has in the node's view.
func slotOwners(ctx context.Context, rdb *redis.Client) ([]slotRange, error) {
	shards, err := rdb.ClusterShards(ctx).Result()
	if err != nil {
		return nil, err
	}
	var ranges []slotRange
	for _, sh := range shards {
		for _, n := range sh.Nodes {
			if n.Role != "master" || n.Health != "online" {
				continue
			}
			port := n.Port
			if port == 0 { // TLS only: no plain port to report
				port = n.TLSPort
			}
			for _, r := range sh.Slots {
				ranges = append(ranges, slotRange{int(r.Start), int(r.End), net.JoinHostPort(n.IP, strconv.FormatInt(port, 10))})
			}
		}
	}
	return ranges, nil
}

// Slot returns the Cluster hash slot of key (CRC16 of its hash tag, or of
// the whole key, mod 16384).
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % 16384)
}

// crc16 is CRC-16/XMODEM, the Cluster key hash.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
