// Package redistest starts real redis-server processes for tests, in the
// spirit of net/http/httptest: each Server listens on a random 127.0.0.1
// port, is configured through its standard input, is ready once it answers
// PING, and is stopped in t.Cleanup. Faults come from process signals
// (Pause, Resume, Kill) and from Proxy.
package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// Options configure a Server. A nil *Options starts a plain standalone
// server that keeps nothing on disk.
type Options struct {
	// Config holds extra redis.conf lines, e.g. "maxmemory-policy allkeys-lru"
	// or "cluster-enabled yes". They come after the helper's own lines, so
	// they win.
	Config []string

	// ReplicaOf, if set, makes the server a replica of that address.
	ReplicaOf string

	// Sentinel starts redis-server in Sentinel mode. Sentinel needs a
	// config file it can rewrite, so the config is written to Dir instead
	// of being sent on standard input.
	Sentinel bool

	// TLS, if set, makes the server listen on TLS only, with the
	// certificates of TLS, and replicate over TLS; see TLS. Clients from
	// Client and ClientOptions use it.
	TLS *TLS

	// FakeTime runs the server under libfaketime (Debian's faketime
	// package), so that SetClock can step its wall clock at run time; see
	// faketime.go. Start fails the test if libfaketime is not installed or
	// the server cannot run under it (RequireFakeTime skips instead).
	FakeTime bool
}

// Server is a redis-server process owned by one test.
type Server struct {
	opts   Options
	ownDir bool
	port   int
	dir    string
	log    *syncBuffer

	mu   sync.Mutex
	proc *redisproc.Process // the current process; nil when stopped
}

// New starts a standalone redis-server with default options.
func New(tb testing.TB) *Server {
	tb.Helper()
	return Start(tb, nil)
}

// Start starts a redis-server configured by opts and registers its
// shutdown with tb.Cleanup. It fails the test if redis-server is not on
// PATH or does not become ready within a few seconds.
func Start(tb testing.TB, opts *Options) *Server {
	tb.Helper()
	s, err := launch(tb.TempDir(), opts)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(func() {
		s.stop(syscall.SIGTERM)
		if tb.Failed() {
			tb.Logf("redis-server %s log:\n%s", s.Addr(), s.log.String())
		}
	})
	return s
}

// Launch starts a redis-server outside any test, for TestMain and
// Example functions that share one server. The caller must Close it.
func Launch(opts *Options) (*Server, error) {
	dir, err := os.MkdirTemp("", "redistest")
	if err != nil {
		return nil, err
	}
	s, err := launch(dir, opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.ownDir = true
	return s, nil
}

// Close stops a server started by Launch and removes its directory.
func (s *Server) Close() {
	s.stop(syscall.SIGTERM)
	if s.ownDir {
		os.RemoveAll(s.dir)
	}
}

func launch(dir string, opts *Options) (*Server, error) {
	s := &Server{dir: dir, log: &syncBuffer{}}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.FakeTime {
		if err := FakeTimeSupported(); err != nil {
			return nil, err // no use trying other ports
		}
	}
	var err error
	for range redisproc.Attempts { // the port can be taken between probe and bind; try again
		if s.port, err = FreePort(); err != nil {
			return nil, err
		}
		if err = s.start(); err == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("start: %w\n%s", err, s.log.String())
}

// FreePort returns a TCP port that was free on 127.0.0.1 a moment ago.
// redis-server cannot pick its own port (port 0 disables TCP), so callers
// must be ready to retry if another process takes it first.
func FreePort() (int, error) { return redisproc.FreePort() }

// Addr returns the server's address, "127.0.0.1:port".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// addrs returns the addresses of servers.
func addrs(servers []*Server) []string {
	a := make([]string, len(servers))
	for i, s := range servers {
		a[i] = s.Addr()
	}
	return a
}

// Port returns the server's TCP port.
func (s *Server) Port() int { return s.port }

// Dir returns the server's working directory (RDB and AOF files).
func (s *Server) Dir() string { return s.dir }

// Log returns what the server has logged so far.
func (s *Server) Log() string { return s.log.String() }

// Client returns a go-redis client for the server, closed at cleanup.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	rdb := redis.NewClient(s.ClientOptions())
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// ClientOptions returns new go-redis options for the server: its address,
// requests ended at their context's deadline (ContextTimeoutEnabled, as
// fencelock requires), and with Options.TLS a TLS configuration that trusts the test CA and
// presents the client certificate.
func (s *Server) ClientOptions() *redis.Options {
	return &redis.Options{ContextTimeoutEnabled: true, Addr: s.Addr(), TLSConfig: s.opts.TLS.Config()}
}

// client returns a go-redis client for the server's own checks: no
// retries, short timeouts. The caller closes it.
func (s *Server) client() *redis.Client {
	o := s.ClientOptions()
	o.MaxRetries, o.DialTimeout = -1, time.Second
	return redis.NewClient(o)
}

// Pause stops the process with SIGSTOP: the server holds its connections
// but answers nothing, like a stalled machine.
func (s *Server) Pause(tb testing.TB) {
	tb.Helper()
	s.signal(tb, syscall.SIGSTOP)
}

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume(tb testing.TB) {
	tb.Helper()
	s.signal(tb, syscall.SIGCONT)
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it.
func (s *Server) Kill(tb testing.TB) {
	tb.Helper()
	s.stop(syscall.SIGKILL)
}

// Stop shuts the server down with SIGTERM and waits for it.
func (s *Server) Stop(tb testing.TB) {
	tb.Helper()
	s.stop(syscall.SIGTERM)
}

// Restart stops the server and starts it again on the same port and
// directory. With keepData the dataset is saved first (SAVE) and reloaded;
// without it every data file is removed, as after a restart without
// persistence.
func (s *Server) Restart(tb testing.TB, keepData bool) {
	tb.Helper()
	if keepData {
		rdb := redis.NewClient(s.ClientOptions())
		err := rdb.Save(context.Background()).Err()
		rdb.Close()
		if err != nil {
			tb.Fatalf("redistest: SAVE before restart: %v", err)
		}
	}
	s.stop(syscall.SIGKILL)
	if !keepData {
		s.removeData(tb)
	}
	s.Start(tb)
}

// Start starts a stopped or killed server again on the same port and
// directory, keeping whatever data files are there.
func (s *Server) Start(tb testing.TB) {
	tb.Helper()
	var err error
	// The port was ours a moment ago; give TIME_WAIT and a slow exit a few tries.
	for range 20 {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Fatalf("redistest: restart %s: %v\n%s", s.Addr(), err, s.log.String())
}

func (s *Server) removeData(tb testing.TB) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	for _, e := range entries {
		n := e.Name()
		if n == "dump.rdb" || strings.HasPrefix(n, "appendonly") || n == "nodes.conf" {
			if err := os.RemoveAll(filepath.Join(s.dir, n)); err != nil {
				tb.Fatalf("redistest: %v", err)
			}
		}
	}
}

func (s *Server) config() string {
	lines := []string{
		"bind 127.0.0.1",
		"dir " + s.dir,
		"logfile \"\"",
	}
	lines = append(lines, s.listenConfig()...)
	if !s.opts.Sentinel {
		lines = append(lines,
			`save ""`,
			"appendonly no",
			"enable-debug-command local",
		)
	}
	if s.opts.ReplicaOf != "" {
		host, port, _ := net.SplitHostPort(s.opts.ReplicaOf)
		lines = append(lines, "replicaof "+host+" "+port)
	}
	lines = append(lines, s.opts.Config...)
	return strings.Join(lines, "\n") + "\n"
}

func (s *Server) start() error {
	o := &redisproc.Options{
		Dir:    s.dir,
		Config: func(int) string { return s.config() },
		Log:    s.log,
		Client: func(int) *redis.Options { return s.ClientOptions() },
	}
	if s.opts.FakeTime {
		env, err := s.fakeTimeEnv()
		if err != nil {
			return err
		}
		o.Env = env
	}
	if s.opts.Sentinel {
		// Sentinel rewrites its config file; it cannot read it from stdin.
		o.ConfigFile, o.Args = "sentinel.conf", []string{"--sentinel"}
	}
	p, err := redisproc.StartOn(context.Background(), s.port, o)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return fmt.Errorf("%w (install the redis-server package; see scripts/install-redis)", err)
		}
		return err
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return nil
}

func (s *Server) signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		tb.Fatalf("redistest: %s is not running", s.Addr())
	}
	if err := p.Signal(sig); err != nil {
		tb.Fatalf("redistest: signal %v to %s: %v", sig, s.Addr(), err)
	}
}

// stop sends sig (after SIGCONT, so a paused server can act on it) and
// waits for the exit, escalating to SIGKILL after five seconds.
func (s *Server) stop(sig syscall.Signal) {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.Stop(sig)
	}
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a
// process's stdout and stderr.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
