package redistest_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A TLS server answers over verified mutual TLS only: not in plain text,
// not to a client without a certificate, and a client that trusts another
// CA or expects another name refuses it.
func TestServer_tls(t *testing.T) {
	t.Parallel()
	pki := redistest.NewTLS(t)
	s := redistest.Start(t, &redistest.Options{TLS: pki})
	ctx := t.Context()
	if err := s.Client(t).Ping(ctx).Err(); err != nil {
		t.Fatalf("PING over TLS: %v", err)
	}
	if got, err := s.Client(t).ConfigGet(ctx, "port").Result(); err != nil || got["port"] != "0" {
		t.Errorf("CONFIG GET port = %v, %v; want 0: no plain TCP port", got, err)
	}

	ping := func(cfg *tls.Config) error {
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), TLSConfig: cfg, MaxRetries: -1, DialTimeout: time.Second})
		defer rdb.Close()
		return rdb.Ping(ctx).Err()
	}
	if err := ping(nil); err == nil {
		t.Errorf("PING in plain text to the TLS port succeeded, want an error")
	}
	other := redistest.NewTLS(t).Config()
	var unknownCA x509.UnknownAuthorityError
	if err := ping(other); !errors.As(err, &unknownCA) {
		t.Errorf("PING trusting another CA: error = %v, want x509.UnknownAuthorityError", err)
	}
	noCert := pki.Config()
	noCert.Certificates = nil
	if err := ping(noCert); err == nil {
		t.Errorf("PING without a client certificate succeeded, want the server to refuse it")
	}

	wrong := pki.WithServerNames(t, "elsewhere.test")
	ws := redistest.Start(t, &redistest.Options{TLS: wrong})
	if err := ws.Client(t).Ping(ctx).Err(); err != nil {
		t.Fatalf("PING verifying the name in the certificate: %v", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: ws.Addr(), TLSConfig: pki.Config(), MaxRetries: -1})
	defer rdb.Close()
	var badName x509.HostnameError
	if err := rdb.Ping(ctx).Err(); !errors.As(err, &badName) {
		t.Errorf("PING to a server whose certificate names elsewhere.test: error = %v, want x509.HostnameError", err)
	}
}
