package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TLS is a private public-key infrastructure made for one test: a CA, a
// certificate for the servers and one for the clients, generated with
// crypto/x509 and written as PEM files to a temporary directory. Nothing
// is committed and nothing comes from outside.
//
// A Server started with Options.TLS has no plain TCP port at all (port 0)
// and a TLS port instead, requires a client certificate signed by the CA,
// and replicates over TLS; sentinels and cluster buses of a group started
// with GroupOptions.TLS talk TLS too. So a client, sentinel or replica that
// gets anywhere got there over verified TLS.
type TLS struct {
	// CAFile is the CA certificate that servers and clients trust.
	CAFile string
	// CertFile and KeyFile are the servers' certificate and key. The
	// certificate serves for both ends of a connection (server and client
	// auth), as redis-server also presents it when it connects to another
	// server: a replica to its master, a sentinel to its servers.
	CertFile, KeyFile string
	// ClientCertFile and ClientKeyFile are a client certificate and key,
	// for redis-cli or other programs a test runs.
	ClientCertFile, ClientKeyFile string

	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	roots  *x509.CertPool
	client tls.Certificate
	dir    string
	// serverName is the name Config verifies, if not the address dialled.
	serverName string
}

// ServerNames are the names in a TLS's server certificate: every address
// a Server listens on, and localhost.
var ServerNames = []string{"127.0.0.1", "::1", "localhost"}

// NewTLS makes a CA, a server certificate for ServerNames and a client
// certificate, in a directory removed at cleanup.
func NewTLS(tb testing.TB) *TLS {
	tb.Helper()
	p := &TLS{dir: tb.TempDir()}
	var err error
	if p.caKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		tb.Fatalf("redistest: CA key: %v", err)
	}
	tmpl := template("fencelock test CA")
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.caKey.PublicKey, p.caKey)
	if err != nil {
		tb.Fatalf("redistest: CA certificate: %v", err)
	}
	if p.ca, err = x509.ParseCertificate(der); err != nil {
		tb.Fatalf("redistest: CA certificate: %v", err)
	}
	p.roots = x509.NewCertPool()
	p.roots.AddCert(p.ca)
	p.CAFile = p.writePEM(tb, "ca.crt", "CERTIFICATE", der)

	p.ClientCertFile, p.ClientKeyFile = p.issue(tb, "client", "fencelock test client", nil, x509.ExtKeyUsageClientAuth)
	if p.client, err = tls.LoadX509KeyPair(p.ClientCertFile, p.ClientKeyFile); err != nil {
		tb.Fatalf("redistest: client certificate: %v", err)
	}
	p.CertFile, p.KeyFile = p.issue(tb, "server", "fencelock test server", ServerNames,
		x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	return p
}

// WithServerNames returns a TLS with the same CA and client certificate,
// whose server certificate names only names: a server started with it
// presents a certificate that does not match its address. Its Config
// verifies the certificate against names[0], so the helpers here can
// still reach the server; a client that verifies the address fails.
func (p *TLS) WithServerNames(tb testing.TB, names ...string) *TLS {
	tb.Helper()
	q := *p
	q.dir, q.serverName = tb.TempDir(), names[0]
	q.CertFile, q.KeyFile = q.issue(tb, "server", "fencelock test server", names,
		x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	return &q
}

// Config returns a client TLS configuration that trusts only the CA and
// presents the client certificate. Its ServerName is empty (except after
// WithServerNames): Go's TLS client, and so go-redis, then verifies the
// certificate against the address dialled.
func (p *TLS) Config() *tls.Config {
	if p == nil {
		return nil
	}
	return &tls.Config{
		ServerName:   p.serverName,
		RootCAs:      p.roots,
		Certificates: []tls.Certificate{p.client},
		MinVersion:   tls.VersionTLS12,
	}
}

// config returns the redis.conf lines that make a server listen on port
// over TLS only and talk TLS to the servers it connects to.
func (p *TLS) config(port int) []string {
	return []string{
		"port 0",
		"tls-port " + strconv.Itoa(port),
		"tls-cert-file " + p.CertFile,
		"tls-key-file " + p.KeyFile,
		"tls-ca-cert-file " + p.CAFile,
		"tls-auth-clients yes",
		"tls-replication yes",
	}
}

// listenConfig returns the lines that make the server listen on its port:
// plain TCP, or TLS only.
func (s *Server) listenConfig() []string {
	if s.opts.TLS == nil {
		return []string{"port " + strconv.Itoa(s.port)}
	}
	return s.opts.TLS.config(s.port)
}

// issue signs a certificate for names (IP addresses or DNS names) with
// the given uses and writes it and its key as NAME.crt and NAME.key.
func (p *TLS) issue(tb testing.TB, file, cn string, names []string, uses ...x509.ExtKeyUsage) (certFile, keyFile string) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("redistest: %s key: %v", file, err)
	}
	tmpl := template(cn)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = uses
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		tb.Fatalf("redistest: %s certificate: %v", file, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatalf("redistest: %s key: %v", file, err)
	}
	return p.writePEM(tb, file+".crt", "CERTIFICATE", der), p.writePEM(tb, file+".key", "PRIVATE KEY", keyDER)
}

func template(cn string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"fencelock tests"}},
		// Some slack for a server whose clock differs a little.
		NotBefore: now.Add(-time.Hour),
		NotAfter:  now.Add(24 * time.Hour),
	}
}

func (p *TLS) writePEM(tb testing.TB, name, typ string, der []byte) string {
	tb.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	return path
}
