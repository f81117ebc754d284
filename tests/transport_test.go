package tests

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/fencelock/fencelock/transport"
	"github.com/fencelock/fencelock/transport/rueidisconn"
	"github.com/fencelock/fencelock/transport/valkeyconn"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	valkey "github.com/valkey-io/valkey-go"
)

// The transport the suites run on, FENCELOCK_TRANSPORT: go-redis (the
// default, also when empty), rueidis or valkey. The tests make go-redis
// clients as they always did; newClient and newQuorum make the Client on
// a client of the chosen library for the same deployment (address or
// Cluster seeds or sentinels, user, password, TLS, database, protocol),
// so that one suite states the promises every transport must keep.
// scripts/test-matrix runs a core set on each (see coreTests there).
var transportName = os.Getenv("FENCELOCK_TRANSPORT")

func goRedisTransport() bool { return transportName == "" || transportName == "go-redis" }

// skipOnTransport skips the test on the rueidis and valkey transports,
// saying why: it injects faults or reads state through go-redis (its
// hooks, dialers, pools) that the other clients do not share.
func skipOnTransport(tb testing.TB, why string) {
	tb.Helper()
	if !goRedisTransport() {
		tb.Skipf("on FENCELOCK_TRANSPORT=%s: %s", transportName, why)
	}
}

// skipHooked is why the tests that inject faults through go-redis hooks
// (lost replies, held or refused requests) skip on the other transports.
const skipHooked = "injects its faults through go-redis hooks, which the other clients do not run"

// newClient is fencelock.New(rdb, opts) on the chosen transport.
func newClient(tb testing.TB, rdb redis.UniversalClient, opts *fencelock.Options) *fencelock.Client {
	tb.Helper()
	if goRedisTransport() {
		return fencelock.New(rdb, opts)
	}
	return fencelock.NewTransport(conn(tb, rdb), opts)
}

// newQuorum is fencelock.NewQuorum(nodes, opts) on the chosen transport.
func newQuorum(tb testing.TB, nodes []redis.UniversalClient, opts *fencelock.Options) *fencelock.Client {
	tb.Helper()
	if goRedisTransport() {
		return fencelock.NewQuorum(nodes, opts)
	}
	conns := make([]transport.Conn, len(nodes))
	for i, n := range nodes {
		if n != nil {
			conns[i] = conn(tb, n)
		}
	}
	return fencelock.NewQuorumTransport(conns, opts)
}

// sentinelClient is g.Client(tb, opts), remembered so that newClient can
// reach the same group through its sentinels.
func sentinelClient(tb testing.TB, g *redistest.SentinelGroup, opts *redis.FailoverOptions) *redis.Client {
	tb.Helper()
	rdb := g.Client(tb, opts)
	of := sentinelsOf{addrs: g.SentinelAddrs()}
	if opts != nil {
		of.user, of.password = opts.SentinelUsername, opts.SentinelPassword
	}
	sentinels.Store(rdb, of)
	tb.Cleanup(func() { sentinels.Delete(rdb) })
	return rdb
}

// sentinelsOf are the sentinels of a sentinelClient, and the user it
// logs in to them as.
type sentinelsOf struct {
	addrs          []string
	user, password string // FailoverOptions.SentinelUsername, SentinelPassword
}

var (
	sentinels sync.Map // *redis.Client of sentinelClient → its sentinelsOf
	conns     sync.Map // go-redis client → its transport.Conn on the chosen library
)

// conn returns the transport for rdb's deployment on the chosen library:
// one client per go-redis client, as Clients made on one go-redis client
// share its pool, closed at tb's cleanup.
func conn(tb testing.TB, rdb redis.UniversalClient) transport.Conn {
	tb.Helper()
	return connOr(tb, rdb, tb.Skipf)
}

// mustConn is conn for a test in which the client must be made: one that
// fails the test, not skips it, if it cannot be.
func mustConn(tb testing.TB, rdb redis.UniversalClient) transport.Conn {
	tb.Helper()
	return connOr(tb, rdb, tb.Fatalf)
}

func connOr(tb testing.TB, rdb redis.UniversalClient, end func(format string, args ...any)) transport.Conn {
	tb.Helper()
	if c, ok := conns.Load(rdb); ok {
		return c.(transport.Conn)
	}
	c, close, err := dialConn(tb, rdb)
	if err != nil {
		end("on FENCELOCK_TRANSPORT=%s: %v (it connects when the client is made, go-redis at the first request)", transportName, err)
	}
	conns.Store(rdb, c)
	tb.Cleanup(func() {
		conns.Delete(rdb)
		close()
	})
	return c
}

// dialConn makes a client of the chosen library for rdb's deployment,
// and returns its transport and its Close, or the error of making it:
// rueidis and valkey-go connect when the client is made.
func dialConn(tb testing.TB, rdb redis.UniversalClient) (transport.Conn, func(), error) {
	tb.Helper()
	o := rueidisOptions(tb, rdb)
	switch transportName {
	case "rueidis":
		rc, err := rueidis.NewClient(o)
		if err != nil {
			return nil, nil, fmt.Errorf("rueidis.NewClient: %w", err)
		}
		return rueidisconn.Conn(rc), rc.Close, nil
	case "valkey":
		vc, err := valkey.NewClient(valkeyOptions(o))
		if err != nil {
			return nil, nil, fmt.Errorf("valkey.NewClient: %w", err)
		}
		return valkeyconn.Conn(vc), vc.Close, nil
	}
	tb.Fatalf("FENCELOCK_TRANSPORT=%s: want go-redis, rueidis or valkey", transportName)
	return nil, nil, nil
}

// rueidisOptions describes rdb's deployment to rueidis: its address, or
// Cluster seeds, or the sentinels of a sentinelClient.
func rueidisOptions(tb testing.TB, rdb redis.UniversalClient) rueidis.ClientOption {
	tb.Helper()
	var o rueidis.ClientOption
	switch r := rdb.(type) {
	case *redis.Client:
		ro := r.Options()
		o.Username, o.Password, o.TLSConfig, o.SelectDB = ro.Username, ro.Password, ro.TLSConfig, ro.DB
		o.AlwaysRESP2 = ro.Protocol == 2
		o.Dialer.Timeout = ro.DialTimeout
		if ro.DisableIdentity { // no CLIENT SETINFO, which an ACL user may lack
			o.ClientSetInfo = rueidis.DisableClientSetInfo
		}
		if v, ok := sentinels.Load(r); ok {
			of := v.(sentinelsOf)
			o.InitAddress = of.addrs
			o.Sentinel = rueidis.SentinelOption{MasterSet: redistest.MasterName, TLSConfig: ro.TLSConfig, Username: of.user, Password: of.password}
		} else {
			// A standalone server, as the go-redis client says: rueidis
			// would otherwise send CLUSTER SLOTS first to find out, which
			// the library's ACL rule does not grant.
			o.InitAddress, o.ForceSingleClient = []string{ro.Addr}, true
		}
	case *redis.ClusterClient:
		ro := r.Options()
		o.InitAddress, o.Username, o.Password, o.TLSConfig = ro.Addrs, ro.Username, ro.Password, ro.TLSConfig
		o.AlwaysRESP2 = ro.Protocol == 2
		o.Dialer.Timeout = ro.DialTimeout
		if ro.DisableIdentity {
			o.ClientSetInfo = rueidis.DisableClientSetInfo
		}
	default:
		tb.Fatalf("newClient: a %T: want a *redis.Client or *redis.ClusterClient", rdb)
	}
	o.DisableCache = true
	// One connection, dialed when the client is made. rueidis's default
	// spreads keys over several connections, each dialed at its first
	// request, inside that request's deadline: with a short TTL the
	// dial and handshake under load spent the deadline of a quorum's
	// first acquire (TestLockDelay_quorum, Redis 8, 4 runs in 8).
	o.PipelineMultiplex = -1
	return o
}

// valkeyOptions is o for valkey-go, rueidis's fork.
func valkeyOptions(o rueidis.ClientOption) valkey.ClientOption {
	return valkey.ClientOption{
		InitAddress: o.InitAddress, Username: o.Username, Password: o.Password,
		TLSConfig: o.TLSConfig, SelectDB: o.SelectDB, AlwaysRESP2: o.AlwaysRESP2,
		Dialer: o.Dialer, DisableCache: o.DisableCache, ForceSingleClient: o.ForceSingleClient,
		ClientSetInfo: o.ClientSetInfo, PipelineMultiplex: o.PipelineMultiplex,
		Sentinel: valkey.SentinelOption{MasterSet: o.Sentinel.MasterSet, TLSConfig: o.Sentinel.TLSConfig,
			Username: o.Sentinel.Username, Password: o.Sentinel.Password},
	}
}
