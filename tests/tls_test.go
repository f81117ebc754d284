package tests

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Over TLS with client certificates, on servers with no plain port, the
// library acquires, renews, releases and wakes waiters, standalone, with
// Sentinel (TLS between all parties) and on Cluster (tls-cluster), and
// with MinReplicas where there are replicas.
func TestTLS_standalone(t *testing.T) {
	t.Parallel()
	pki := redistest.NewTLS(t)
	m := redistest.Start(t, &redistest.Options{TLS: pki})
	redistest.Start(t, &redistest.Options{TLS: pki, ReplicaOf: m.Addr()})
	redistest.WaitReplicasInSync(t, m, 1)
	lifeCycle(t, func() redis.UniversalClient { return m.Client(t) }, fencelock.Options{}, 1)
}

func TestTLS_sentinel(t *testing.T) {
	t.Parallel()
	pki := redistest.NewTLS(t)
	g := redistest.StartSentinelGroup(t, &redistest.GroupOptions{TLS: pki})
	lifeCycle(t, func() redis.UniversalClient { return sentinelClient(t, g, nil) }, fencelock.Options{}, 2)
}

func TestTLS_cluster(t *testing.T) {
	t.Parallel()
	pki := redistest.NewTLS(t)
	cl := redistest.StartCluster(t, &redistest.GroupOptions{TLS: pki})
	lifeCycle(t, func() redis.UniversalClient { return cl.Client(t, nil) }, fencelock.Options{}, 1)
}

// A server whose certificate does not verify is an error that says so,
// never a fallback to an unverified or a plain connection: for a
// certificate from another CA, one for another name, and a client that
// speaks plain text to a TLS port or brings no client certificate.
func TestTLS_unverified(t *testing.T) {
	t.Parallel()
	pki := redistest.NewTLS(t)
	s := redistest.Start(t, &redistest.Options{TLS: pki})
	otherCA := redistest.NewTLS(t).Config()
	noCert := pki.Config()
	noCert.Certificates = nil
	wrongName := redistest.Start(t, &redistest.Options{TLS: pki.WithServerNames(t, "elsewhere.test")})

	var unknownCA x509.UnknownAuthorityError
	var badName x509.HostnameError
	for _, tc := range []struct {
		name string
		addr string
		tls  *tls.Config
		as   any // a pointer to the error type the error must wrap, or nil
	}{
		{"another CA", s.Addr(), otherCA, &unknownCA},
		{"another name", wrongName.Addr(), pki.Config(), &badName},
		{"plain text", s.Addr(), nil, nil},
		{"no client certificate", s.Addr(), noCert, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: tc.addr, TLSConfig: tc.tls, MaxRetries: -1, DialTimeout: unverifiedDial, DialerRetries: 1})
			t.Cleanup(func() { rdb.Close() })
			assertRefused(t, newClient(t, rdb, refusedOptions), tc.as)
		})
	}
}

func TestTLS_unverifiedSentinel(t *testing.T) {
	t.Parallel()
	g := redistest.StartSentinelGroup(t, &redistest.GroupOptions{TLS: redistest.NewTLS(t)})
	rdb := sentinelClient(t, g, &redis.FailoverOptions{ContextTimeoutEnabled: true, TLSConfig: redistest.NewTLS(t).Config(), MaxRetries: -1, DialTimeout: unverifiedDial, DialerRetries: 1})
	var unknownCA x509.UnknownAuthorityError
	assertRefused(t, newClient(t, rdb, refusedOptions), &unknownCA)
}

func TestTLS_unverifiedCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, &redistest.GroupOptions{TLS: redistest.NewTLS(t)})
	rdb := cl.Client(t, &redis.ClusterOptions{ContextTimeoutEnabled: true, TLSConfig: redistest.NewTLS(t).Config(), MaxRetries: -1, DialTimeout: unverifiedDial, DialerRetries: 1})
	var unknownCA x509.UnknownAuthorityError
	assertRefused(t, newClient(t, rdb, refusedOptions), &unknownCA)
}

// unverifiedDial bounds the dial of a connection whose certificate is
// refused. go-redis retries a failed dial (DialerRetries, 5 by default,
// 100ms apart) and keeps only the last attempt's error; a Sentinel client
// does so for each sentinel inside the master's dial, all within one
// DialTimeout. On a loaded machine, the TLS handshakes then outlast it,
// and the attempt cut by the deadline replaces the certificate error
// with "context deadline exceeded". One attempt per dial, with time to
// finish its handshake, fails for the reason the tests check.
const unverifiedDial = 10 * time.Second

// refusedOptions give leases room: a call over a connection that is
// refused must fail for that reason, not because a slow discovery let
// the lease's deadline pass.
var refusedOptions = &fencelock.Options{TTL: time.Minute}

// assertRefused checks that every call of c fails with a connection
// error, wrapping the error type as points to if it is not nil, and never
// reports a lock as merely not acquired or lost.
func assertRefused(t *testing.T, c *fencelock.Client, as any) {
	t.Helper()
	ctx := t.Context()
	l, err := c.TryAcquire(ctx, "refused")
	if err == nil {
		l.Release(ctx)
		t.Fatalf("TryAcquire over an unverified connection: acquired, want an error")
	}
	if errors.Is(err, fencelock.ErrNotAcquired) {
		t.Errorf("TryAcquire error = %v, want a connection error, not ErrNotAcquired", err)
	}
	if as != nil && !errors.As(err, as) {
		t.Errorf("TryAcquire error = %v, want it to wrap %T", err, as)
	}
	a, err := c.Attach("refused", "secret-of-no-lease", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Renew(ctx); err == nil || errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("Renew over an unverified connection: error = %v, want a connection error", err)
	} else if as != nil && !errors.As(err, as) {
		t.Errorf("Renew error = %v, want it to wrap %T", err, as)
	}
	if err := a.Release(ctx); err == nil || errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("Release over an unverified connection: error = %v, want a connection error", err)
	} else if as != nil && !errors.As(err, as) {
		t.Errorf("Release error = %v, want it to wrap %T", err, as)
	}
}
