package chaos_test

import (
	"os"
	"testing"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/transport"
	"github.com/fencelock/fencelock/transport/rueidisconn"
	"github.com/fencelock/fencelock/transport/valkeyconn"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	valkey "github.com/valkey-io/valkey-go"
)

// The transport the lock clients run on, FENCELOCK_TRANSPORT, as in
// ../tests (tests/transport_test.go): go-redis (the default, also when
// empty), rueidis or valkey. The scenarios make go-redis clients as they
// always did; lockClient, newLock and newQuorumLock make the lock Client
// on a client of the chosen library for the same server (address,
// timeouts), so that one scenario states the promise every transport
// must keep. Holder processes inherit the variable. Only the lock
// clients change: resources, admin clients and the clients that read the
// servers' state stay on go-redis. scripts/test-matrix runs a core set of
// scenarios on each (CHAOS_CORE there; README.md, "Transports").
var transportName = os.Getenv("FENCELOCK_TRANSPORT")

func goRedisTransport() bool { return transportName == "" || transportName == "go-redis" }

// skipOnTransport skips the test on the rueidis and valkey transports,
// saying why.
func skipOnTransport(tb testing.TB, why string) {
	tb.Helper()
	if !goRedisTransport() {
		tb.Skipf("on FENCELOCK_TRANSPORT=%s: %s", transportName, why)
	}
}

// skipHooked is why the scenarios whose faults are go-redis hooks (lost
// replies) skip on the other transports.
const skipHooked = "injects its faults (lost replies) through go-redis hooks, which the other clients do not run"

// lockClient returns a lock client over rdb with the runs' options.
func lockClient(tb testing.TB, rdb redis.UniversalClient) *fencelock.Client {
	tb.Helper()
	return newLock(tb, rdb, lockOptions())
}

// newLock is fencelock.New(rdb, opts) on the chosen transport.
func newLock(tb testing.TB, rdb redis.UniversalClient, opts *fencelock.Options) *fencelock.Client {
	tb.Helper()
	if goRedisTransport() {
		return fencelock.New(rdb, opts)
	}
	return fencelock.NewTransport(conn(tb, rdb), opts)
}

// newQuorumLock is fencelock.NewQuorum(nodes, opts) on the chosen
// transport.
func newQuorumLock(tb testing.TB, nodes []redis.UniversalClient, opts *fencelock.Options) *fencelock.Client {
	tb.Helper()
	if goRedisTransport() {
		return fencelock.NewQuorum(nodes, opts)
	}
	conns := make([]transport.Conn, len(nodes))
	for i, n := range nodes {
		conns[i] = conn(tb, n)
	}
	return fencelock.NewQuorumTransport(conns, opts)
}

// conn returns a transport on the chosen library for rdb's server, closed
// at tb's cleanup: a client of its own, as rdb is.
func conn(tb testing.TB, rdb redis.UniversalClient) transport.Conn {
	tb.Helper()
	o := rueidisOptions(tb, rdb)
	switch transportName {
	case "rueidis":
		c, err := rueidis.NewClient(o)
		if err != nil {
			tb.Fatalf("FENCELOCK_TRANSPORT=rueidis: rueidis.NewClient(%v): %v", o.InitAddress, err)
		}
		tb.Cleanup(c.Close)
		return rueidisconn.Conn(c)
	case "valkey":
		c, err := valkey.NewClient(valkeyOptions(o))
		if err != nil {
			tb.Fatalf("FENCELOCK_TRANSPORT=valkey: valkey.NewClient(%v): %v", o.InitAddress, err)
		}
		tb.Cleanup(c.Close)
		return valkeyconn.Conn(c)
	}
	tb.Fatalf("FENCELOCK_TRANSPORT=%s: want go-redis, rueidis or valkey", transportName)
	return nil
}

// rueidisOptions describes rdb's server to rueidis as tests/transport_test.go
// does: a standalone server's address, or a Cluster's seeds. A
// Sentinel-failover go-redis client does not say where its sentinels are:
// the scenarios that use one skip on the other transports.
func rueidisOptions(tb testing.TB, rdb redis.UniversalClient) rueidis.ClientOption {
	tb.Helper()
	var o rueidis.ClientOption
	switch r := rdb.(type) {
	case *redis.Client:
		ro := r.Options()
		o.InitAddress, o.ForceSingleClient = []string{ro.Addr}, true
		o.Dialer.Timeout = ro.DialTimeout
	case *redis.ClusterClient:
		ro := r.Options()
		o.InitAddress = ro.Addrs
		o.Dialer.Timeout = ro.DialTimeout
	default:
		tb.Fatalf("lock client on FENCELOCK_TRANSPORT=%s: a %T: want a *redis.Client or *redis.ClusterClient", transportName, rdb)
	}
	o.DisableCache = true
	// One connection, dialed when the client is made (the reason is
	// tests/transport_test.go's: rueidis's default dials a connection per
	// key group at its first request, inside that request's deadline).
	o.PipelineMultiplex = -1
	return o
}

// valkeyOptions is o for valkey-go, rueidis's fork.
func valkeyOptions(o rueidis.ClientOption) valkey.ClientOption {
	return valkey.ClientOption{
		InitAddress: o.InitAddress, Dialer: o.Dialer, DisableCache: o.DisableCache,
		ForceSingleClient: o.ForceSingleClient, PipelineMultiplex: o.PipelineMultiplex,
	}
}
