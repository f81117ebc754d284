package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
)

// tlsFlags are the TLS flags of every command that connects, named as
// redis-cli's: --tls, --cacert, --cert, --key, --sni and --insecure.
type tlsFlags struct {
	on        bool
	cacert    string
	cert, key string
	sni       string
	insecure  bool
}

func (f *tlsFlags) add(cmd *command) {
	cmd.fs.BoolVar(&f.on, "tls", false, "connect with TLS, as a rediss:// URL does")
	cmd.fromEnv("tls", "REDIS_TLS")
	cmd.fs.StringVar(&f.cacert, "cacert", "", "verify the server's certificate with the CA certificates in `file` (PEM), not the system's")
	cmd.fromEnv("cacert", "REDIS_CACERT")
	cmd.fs.StringVar(&f.cert, "cert", "", "present the client certificate in `file` (PEM), with --key: mutual TLS")
	cmd.fromEnv("cert", "REDIS_CERT")
	cmd.fs.StringVar(&f.key, "key", "", "the client certificate's private key, in `file` (PEM)")
	cmd.fromEnv("key", "REDIS_KEY")
	cmd.fs.StringVar(&f.sni, "sni", "", "server `name` to ask for (SNI) and to verify the certificate against, if not the host dialled")
	cmd.fromEnv("sni", "REDIS_SNI")
	cmd.fs.BoolVar(&f.insecure, "insecure", false, "do not verify the server's certificate: anyone on the network path can pose as the server\n      (warned on stderr; never needed with --cacert)")
	cmd.fromEnv("insecure", "REDIS_INSECURE")
}

// apply configures TLS on t, as the URL (rediss://) and the flags ask,
// reading the files now: a file that is missing or holds no certificate
// is a usage error before any connection. It warns on stderr when
// certificates go unverified.
func (f *tlsFlags) apply(cmd *command, t *redisTarget) error {
	p := t.tlsConfig()
	if *p == nil && !f.on {
		for _, name := range []string{"cacert", "cert", "key", "sni", "insecure"} {
			if cmd.set(name) {
				return usageErrorf("%s needs TLS: give --tls or a rediss:// URL", cmd.source(name))
			}
		}
		return nil
	}
	if t.node != nil && t.node.Network == "unix" {
		return usageErrorf("--tls: TLS over a unix socket is not supported; connect over TCP")
	}
	if *p == nil {
		// As go-redis's rediss://: TLS 1.2 at least; the name verified
		// is the host dialled.
		*p = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	cfg := *p
	skipVerify := cfg.InsecureSkipVerify // skip_verify=true in the URL
	switch {
	case f.insecure && f.cacert != "":
		return usageErrorf("%s and %s contradict each other: --cacert is for verifying", cmd.source("insecure"), cmd.source("cacert"))
	case (f.cert == "") != (f.key == ""):
		return usageErrorf("--cert and --key go together: the client certificate and its key")
	}
	if f.cacert != "" {
		pem, err := os.ReadFile(f.cacert)
		if err != nil {
			return usageErrorf("%s: %v", cmd.source("cacert"), err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return usageErrorf("%s: no PEM certificate in the file", cmd.source("cacert"))
		}
		cfg.RootCAs = roots
	}
	if f.cert != "" {
		// The key's contents never appear in errors: LoadX509KeyPair
		// names what is wrong, not what it read.
		pair, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return usageErrorf("%s, %s: %v", cmd.source("cert"), cmd.source("key"), err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if f.sni != "" {
		cfg.ServerName = f.sni
	}
	if f.insecure || skipVerify {
		why := cmd.source("insecure")
		if !f.insecure {
			why = "skip_verify in --redis"
		}
		cfg.InsecureSkipVerify = true
		fmt.Fprintf(cmd.c.stderr, "fencelock %s: WARNING: %s: the server's TLS certificate is NOT verified; anyone on the network path can pose as the server and read the passwords and lock secrets sent to it. Give --cacert with its CA instead.\n", cmd.name, why)
	}
	t.seen = &tlsSeen{}
	cfg.VerifyConnection = t.seen.record
	return nil
}

// resetAfterHandshake says what it most likely means when a server closes
// a TLS connection that gave no client certificate right after the
// handshake: with TLS 1.3 the server checks the client's certificate only
// then, and its certificate_required alert is often lost in the reset of
// the client's first write. "" if that is not the case.
func (t *redisTarget) resetAfterHandshake(err error) string {
	if t.seen == nil || !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.EPIPE) {
		return ""
	}
	if _, _, shook := t.seen.handshake(); !shook || len((*t.tlsConfig()).Certificates) > 0 {
		return ""
	}
	return "the server closed the connection after the TLS handshake, as one does that wants a client certificate: give --cert and --key"
}

// tlsConfig returns where the target keeps its TLS configuration.
func (t *redisTarget) tlsConfig() **tls.Config {
	switch {
	case t.failover != nil:
		return &t.failover.TLSConfig
	case t.cluster != nil:
		return &t.cluster.TLSConfig
	}
	return &t.node.TLSConfig
}

// tlsSeen records the TLS handshakes of a target's connections: what
// doctor reports of the connection's encryption.
type tlsSeen struct {
	mu       sync.Mutex
	n        int // handshakes completed
	verified bool
	last     tls.ConnectionState
}

// record is the TLS configuration's VerifyConnection: called on every
// handshake, after the certificate was verified, unless --insecure.
func (s *tlsSeen) record(cs tls.ConnectionState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	s.verified = len(cs.VerifiedChains) > 0
	s.last = cs
	return nil
}

// handshake returns the last handshake's state, whether its certificate
// was verified, and whether there was one.
func (s *tlsSeen) handshake() (tls.ConnectionState, bool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.verified, s.n > 0
}

// tlsHint says what a TLS failure means and what to do, or "" if err is
// none: the error itself carries crypto/x509's reason.
func tlsHint(err error) string {
	var (
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
		record  tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &unknown):
		return "the server's TLS certificate does not verify: give --cacert with the CA that issued it"
	case errors.As(err, &host):
		return "the server's TLS certificate is not for the host dialled: give --sni with a name it has"
	case errors.As(err, &invalid):
		return "the server's TLS certificate is not valid here"
	case errors.As(err, &record):
		return "the server does not speak TLS at this port: drop --tls, or use redis:// instead of rediss://"
	case err != nil && (strings.Contains(err.Error(), "tls: certificate required") || strings.Contains(err.Error(), "tls: bad certificate")):
		// The server's alert, which crypto/tls reports as text only:
		// certificate_required (TLS 1.3), bad_certificate (TLS 1.2).
		return "the server wants a client certificate it trusts: give --cert and --key"
	}
	return ""
}
