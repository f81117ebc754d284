package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// tlsArgs are the flags that trust pki's CA and present its client
// certificate.
func tlsArgs(pki *redistest.TLS) []string {
	return []string{"--cacert", pki.CAFile, "--cert", pki.ClientCertFile, "--key", pki.ClientKeyFile}
}

// Over mutual TLS, with a private CA, to servers that have no plain port:
// the flags of redis-cli, or the same from the environment, with a
// rediss:// URL or --tls.
func TestTLS_flags(t *testing.T) {
	t.Parallel()
	pki := redistest.NewTLS(t)
	s := redistest.Start(t, &redistest.Options{TLS: pki})
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"rediss URL", append([]string{"--redis", "rediss://" + s.Addr()}, tlsArgs(pki)...), nil},
		{"--tls", append([]string{"--tls", "--redis", "redis://" + s.Addr()}, tlsArgs(pki)...), nil},
		{"environment", nil, map[string]string{
			"REDIS_URL": "redis://" + s.Addr(), "REDIS_TLS": "1", "REDIS_CACERT": pki.CAFile,
			"REDIS_CERT": pki.ClientCertFile, "REDIS_KEY": pki.ClientKeyFile,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lock := "tls-" + strings.ReplaceAll(tc.name, " ", "-")
			h := newHarness(t)
			h.env = tc.env
			if h.env == nil {
				h.env = map[string]string{}
			}
			args := append(append([]string{"run"}, tc.args...), lock, "--")
			if code := h.run(append(args, h.self("env")...)...); code != 0 {
				t.Fatalf("run over TLS: exit = %d, want 0\n%s", code, h.stderr)
			}
			if !strings.Contains(h.stdout.String(), "FENCELOCK_TOKEN=") {
				t.Errorf("COMMAND did not run with its token: %q", h.stdout)
			}
			st := newHarness(t)
			st.env = h.env
			if code := st.run(append(append([]string{"status"}, tc.args...), lock)...); code != 0 || !strings.Contains(st.stdout.String(), "held   no") {
				t.Errorf("status over TLS: exit %d, %q; want 0 and the lock free", code, st.stdout)
			}
			if strings.Contains(h.stderr.String()+st.stderr.String(), "WARNING") {
				t.Errorf("verified TLS warned: %s%s", h.stderr, st.stderr)
			}
		})
	}
}

// A server whose certificate does not verify is exit 125 with the x509
// reason and what to do; never a fallback to an unverified or a plain
// connection. --insecure connects anyway, loudly.
func TestTLS_unverified(t *testing.T) {
	t.Parallel()
	pki := redistest.NewTLS(t)
	s := redistest.Start(t, &redistest.Options{TLS: pki})
	other := redistest.NewTLS(t)
	wrongName := redistest.Start(t, &redistest.Options{TLS: pki.WithServerNames(t, "elsewhere.test")})
	plain := redistest.New(t)
	for _, tc := range []struct {
		name string
		args []string
		says []string
	}{
		{"another CA", append([]string{"--redis", "rediss://" + s.Addr()}, tlsArgs(other)...),
			[]string{"x509: certificate signed by unknown authority", "give --cacert"}},
		{"the system's CAs", []string{"--redis", "rediss://" + s.Addr(), "--cert", pki.ClientCertFile, "--key", pki.ClientKeyFile},
			[]string{"x509: certificate signed by unknown authority"}},
		{"another name", append([]string{"--redis", "rediss://" + wrongName.Addr()}, tlsArgs(pki)...),
			[]string{"x509: cannot validate certificate for 127.0.0.1", "give --sni"}},
		{"no client certificate", []string{"--redis", "rediss://" + s.Addr(), "--cacert", pki.CAFile},
			// The server's certificate_required alert, or the reset
			// that often overtakes it: either way, the same advice.
			[]string{"give --cert and --key"}},
		{"plain text to a TLS port", []string{"--redis", "redis://" + s.Addr()}, nil},
		{"TLS to a plain port", []string{"--redis", "rediss://" + plain.Addr(), "--cacert", pki.CAFile, "--timeout", "1s"},
			[]string{"does not speak TLS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			if code := h.run(append(append([]string{"status"}, tc.args...), "unverified")...); code != exitInternal {
				t.Errorf("status: exit = %d, want %d", code, exitInternal)
			}
			for _, want := range tc.says {
				if !strings.Contains(h.stderr.String(), want) {
					t.Errorf("stderr = %q, want it to say %q", h.stderr, want)
				}
			}
			if h.stdout.String() != "" {
				t.Errorf("stdout = %q, want nothing", h.stdout)
			}
		})
	}

	t.Run("--sni", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		args := append([]string{"status", "--redis", "rediss://" + wrongName.Addr(), "--sni", "elsewhere.test"}, tlsArgs(pki)...)
		if code := h.run(append(args, "named")...); code != 0 {
			t.Errorf("status --sni with the certificate's name: exit = %d, want 0", code)
		}
	})
	for _, insecure := range [][]string{
		{"--redis", "rediss://" + s.Addr(), "--insecure"},
		{"--redis", "rediss://" + s.Addr() + "?skip_verify=true"},
	} {
		t.Run(strings.Join(insecure[1:], " "), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			// The server still checks the client's certificate: present
			// one it trusts.
			args := append(append([]string{"status"}, insecure...), "--cert", pki.ClientCertFile, "--key", pki.ClientKeyFile)
			if code := h.run(append(args, "insecure")...); code != 0 {
				t.Fatalf("status %v: exit = %d, want 0", insecure, code)
			}
			if e := h.stderr.String(); !strings.Contains(e, "WARNING") || !strings.Contains(e, "NOT verified") {
				t.Errorf("stderr = %q, want a loud warning that the certificate is not verified", e)
			}
		})
	}
}

// Bad TLS flags are usage errors, before any connection.
func TestTLS_usage(t *testing.T) {
	t.Parallel()
	pki := redistest.NewTLS(t)
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		says string
	}{
		{[]string{"--cacert", pki.CAFile}, nil, "--cacert " + pki.CAFile + " needs TLS"},
		{nil, map[string]string{"REDIS_SNI": "x.test"}, "REDIS_SNI=x.test needs TLS"},
		{[]string{"--tls", "--cert", pki.ClientCertFile}, nil, "--cert and --key go together"},
		{[]string{"--tls", "--cacert", notPEM}, nil, "no PEM certificate"},
		{[]string{"--tls", "--cacert", notPEM + ".missing"}, nil, "no such file"},
		{[]string{"--tls", "--cert", notPEM, "--key", notPEM}, nil, "--cert " + notPEM},
		{[]string{"--tls", "--insecure", "--cacert", pki.CAFile}, nil, "contradict"},
		{[]string{"--tls", "--redis", "unix:///tmp/redis.sock"}, nil, "unix socket"},
	} {
		h := newHarness(t)
		if tc.env != nil {
			h.env = tc.env
		}
		args := append([]string{"status", "--redis", "redis://127.0.0.1:1"}, tc.args...)
		if code := h.run(append(args, "usage")...); code != exitUsage || !strings.Contains(h.stderr.String(), tc.says) {
			t.Errorf("status %v (env %v): exit = %d, stderr %q; want %d, %q", tc.args, tc.env, code, h.stderr, exitUsage, tc.says)
		}
	}
}

func TestTLS_sentinel(t *testing.T) {
	t.Parallel()
	pki := redistest.NewTLS(t)
	g := redistest.StartSentinelGroup(t, &redistest.GroupOptions{TLS: pki})
	url := "rediss+sentinel://" + strings.Join(g.SentinelAddrs(), ",") + "/" + redistest.MasterName
	h := newHarness(t)
	args := append(append([]string{"run", "--redis", url}, tlsArgs(pki)...), "tls-sentinel", "--")
	if code := h.run(append(args, h.self("env")...)...); code != 0 {
		t.Fatalf("run over TLS through Sentinel: exit = %d, want 0", code)
	}
	if !strings.Contains(h.stdout.String(), "FENCELOCK_TOKEN=") {
		t.Errorf("COMMAND did not run with its token: %q", h.stdout)
	}
	other := newHarness(t)
	if code := other.run(append(append([]string{"status", "--redis", url}, tlsArgs(redistest.NewTLS(t))...), "tls-sentinel")...); code != exitInternal || !strings.Contains(other.stderr.String(), "x509") {
		t.Errorf("status through Sentinel with another CA: exit = %d, stderr %q; want %d and the x509 reason", code, other.stderr, exitInternal)
	}
}

func TestTLS_cluster(t *testing.T) {
	t.Parallel()
	pki := redistest.NewTLS(t)
	cl := redistest.StartCluster(t, &redistest.GroupOptions{TLS: pki})
	url := "rediss+cluster://" + strings.Join(cl.Addrs(), ",")
	h := newHarness(t)
	args := append(append([]string{"run", "--redis", url}, tlsArgs(pki)...), "tls-cluster", "--")
	if code := h.run(append(args, h.self("env")...)...); code != 0 {
		t.Fatalf("run over TLS on a Cluster: exit = %d, want 0", code)
	}
	if !strings.Contains(h.stdout.String(), "FENCELOCK_TOKEN=") {
		t.Errorf("COMMAND did not run with its token: %q", h.stdout)
	}
	code, rep, _ := doctorRun(t, nil, append([]string{"--redis", url}, tlsArgs(pki)...)...)
	if i := slices.IndexFunc(rep.Findings, func(f finding) bool { return f.Check == "tls" }); i < 0 || rep.Findings[i].Severity != sevOK || !strings.Contains(rep.Findings[i].Message, "verified") {
		t.Errorf("doctor's tls finding on a TLS Cluster: %+v, want ok, verified", rep.Findings)
	}
	if code == exitInternal {
		t.Errorf("doctor on a TLS Cluster: exit %d", code)
	}
}

// doctor says whether the connection is encrypted and the certificate
// verified, and where a password would go in clear text.
func TestDoctor_transport(t *testing.T) {
	t.Parallel()
	pki := redistest.NewTLS(t)
	s := redistest.Start(t, &redistest.Options{TLS: pki})
	_, _, fs := doctorRun(t, nil, append([]string{"--redis", "rediss://" + s.Addr()}, tlsArgs(pki)...)...)
	wantFinding(t, fs, "tls", sevOK, "the server's certificate verified")
	wantFinding(t, fs, "tls", sevOK, "fencelock test server")
	wantFinding(t, fs, "tls", sevOK, "client certificate presented")

	_, _, fs = doctorRun(t, nil, "--redis", "rediss://"+s.Addr(), "--insecure", "--cert", pki.ClientCertFile, "--key", pki.ClientKeyFile)
	wantFinding(t, fs, "tls", sevWarn, "NOT verified")

	plain := redistest.New(t)
	_, _, fs = doctorRun(t, map[string]string{"REDIS_PASSWORD": "not-needed"}, "--redis", redisURL(plain))
	wantFinding(t, fs, "tls", sevOK, "loopback addresses only")
	if f, ok := fs["credentials"]; ok {
		t.Errorf("credentials finding on loopback: %+v", f)
	}
}

// What counts as leaving the host: anything but loopback addresses,
// localhost and unix sockets.
func TestExposed(t *testing.T) {
	got := exposed([]string{"127.0.0.1:6379", "[::1]:6379", "localhost:6379", "127.8.9.10:1", "unix:/tmp/r.sock",
		"10.0.0.7:6379", "redis.internal:6380", "[2001:db8::1]:6379", "192.168.1.2"})
	want := []string{"10.0.0.7:6379", "redis.internal:6380", "[2001:db8::1]:6379", "192.168.1.2"}
	if !slices.Equal(got, want) {
		t.Errorf("exposed = %q, want %q", got, want)
	}
}

// A reset right after a handshake that gave no client certificate is
// taken for the server's demand of one, whose alert the reset overtook;
// with a certificate given, or before any handshake, it is not.
func TestResetAfterHandshake(t *testing.T) {
	reset := fmt.Errorf("write tcp: %w", syscall.ECONNRESET)
	for _, tc := range []struct {
		name      string
		handshake bool
		cert      bool
		err       error
		want      bool
	}{
		{"reset after a handshake without a certificate", true, false, reset, true},
		{"EOF after a handshake without a certificate", true, false, io.EOF, true},
		{"with a client certificate", true, true, reset, false},
		{"before any handshake", false, false, reset, false},
		{"another error", true, false, errors.New("i/o timeout"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := &redisTarget{node: &redis.Options{ContextTimeoutEnabled: true, TLSConfig: &tls.Config{}}, seen: &tlsSeen{}}
			if tc.handshake {
				target.seen.record(tls.ConnectionState{})
			}
			if tc.cert {
				target.node.TLSConfig.Certificates = []tls.Certificate{{}}
			}
			if got := target.resetAfterHandshake(tc.err) != ""; got != tc.want {
				t.Errorf("resetAfterHandshake(%v) gives a hint: %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
