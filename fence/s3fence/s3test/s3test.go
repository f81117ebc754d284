// Package s3test starts S3 servers for the tests of this repository
// (s3fence, the fencelock command, the chaos suite; its API changes with
// them): SeaweedFS, four processes of its weed binary (master, volume
// server, filer, S3 gateway), on random 127.0.0.1 ports, with a temporary
// data directory and credentials of its own, stopped in t.Cleanup. It is
// not internal because those tests are in other modules.
//
// SeaweedFS is used because it is an S3 server that people run, builds
// from its Go module (scripts/install-s3), and enforces conditional
// writes atomically: of concurrent PUTs with If-Match naming the same
// ETag exactly one succeeds (s3fence's TestProbe proves it on every run;
// 200 rounds of 8 concurrent PUTs found no second winner when it was
// chosen). Its gateway serializes conditional writes to one key with a
// lock whose waiters retry every second, so contended writes are slow
// there (a loser waits up to a second), not wrong.
//
// The weed binary is found from FENCELOCK_WEED, else from the file
// s3server in the cache of scripts/install-s3 (FENCELOCK_CACHE, default
// $HOME/.cache/fencelock), else on PATH.
package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Timeouts of a server's start and stop.
const (
	readyTimeout = 60 * time.Second
	stopTimeout  = 5 * time.Second
	attempts     = 5 // starts on new ports when one was taken
)

// Region is the region every client of a Server names (SeaweedFS
// accepts any).
const Region = "us-east-1"

// Server is a running SeaweedFS with its S3 gateway.
type Server struct {
	dir          string
	s3Port       int
	access, key  string
	procs        []*proc
	bucketSerial int
	mu           sync.Mutex
}

type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Bin returns the path of the weed binary, or an error that says how to
// install it.
func Bin() (string, error) {
	if p := os.Getenv("FENCELOCK_WEED"); p != "" {
		return p, nil
	}
	cache := os.Getenv("FENCELOCK_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err == nil {
			cache = filepath.Join(home, ".cache", "fencelock")
		}
	}
	if b, err := os.ReadFile(filepath.Join(cache, "s3server")); err == nil {
		if p := strings.TrimSpace(string(b)); p != "" {
			return p, nil
		}
	}
	if p, err := exec.LookPath("weed"); err == nil {
		return p, nil
	}
	return "", errors.New("no SeaweedFS weed binary: run scripts/install-s3 (it builds one into $HOME/.cache/fencelock), or set FENCELOCK_WEED to one")
}

// Start starts a server, on other ports again (up to 5 times) if one of
// its processes exits before it is ready (most likely because another
// process took a port first). Stop stops it. A start takes 10 to 20
// seconds, most of it SeaweedFS's own: the gateway takes no write until
// the master has announced the filer's lock ring.
func Start() (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	for i := 0; ; i++ {
		s, err := start(bin)
		if err == nil || i == attempts-1 {
			return s, err
		}
	}
}

// New starts a server (Start) and stops it when t ends. It fails t if the
// server cannot be started.
func New(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatalf("starting SeaweedFS: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

var shared struct {
	sync.Mutex
	s   *Server
	err error
}

// Shared returns the server that the tests of this process share, started
// by the first call (Start), so that the start is paid once; tests keep
// apart by buckets (NewBucket). The test binary's TestMain stops it with
// StopShared. It fails t if the server cannot be started.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if shared.s == nil && shared.err == nil {
		shared.s, shared.err = Start()
	}
	if shared.err != nil {
		t.Fatalf("starting SeaweedFS: %v", shared.err)
	}
	return shared.s
}

// StopShared stops the server of Shared, if it was started.
func StopShared() {
	shared.Lock()
	defer shared.Unlock()
	if shared.s != nil {
		shared.s.Stop()
		shared.s = nil
	}
}

// Endpoint returns the S3 endpoint, "http://127.0.0.1:PORT".
func (s *Server) Endpoint() string { return "http://127.0.0.1:" + strconv.Itoa(s.s3Port) }

// Addr returns the S3 gateway's address, "127.0.0.1:PORT".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.s3Port) }

// Credentials returns the access key ID and secret of the server's only
// identity, which may do anything.
func (s *Server) Credentials() (id, secret string) { return s.access, s.key }

// Client returns an S3 client of endpoint (the server's, or a proxy's in
// front of it) with the server's credentials, path-style addressing and
// no retries of its own (a test sees each request's outcome).
func (s *Server) Client(endpoint string) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint:     aws.String(endpoint),
		Region:           Region,
		UsePathStyle:     true,
		Credentials:      credentials.NewStaticCredentialsProvider(s.access, s.key, ""),
		RetryMaxAttempts: 1,
	})
}

// NewBucket creates a bucket with a name of its own and returns the name.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	s.mu.Lock()
	s.bucketSerial++
	name := fmt.Sprintf("b%d-%s", s.bucketSerial, randomHex(4))
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client(s.Endpoint()).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("CreateBucket(%s): %v", name, err)
	}
	return name
}

// start starts the four processes on free ports and waits until the
// gateway, with this server's credentials, stores an object.
func start(bin string) (*Server, error) {
	dir, err := os.MkdirTemp("", "s3test-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, access: "AK" + strings.ToUpper(randomHex(8)), key: randomHex(20)}
	ports := make([]int, 8)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	s.s3Port = ports[6]
	for _, d := range []string{"master", "volume", "filer"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	config := fmt.Sprintf(`{"identities":[{"name":"test","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","List","Tagging","Write"]}]}`, s.access, s.key)
	if err := os.WriteFile(filepath.Join(dir, "s3.json"), []byte(config), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	master := fmt.Sprintf("127.0.0.1:%d.%d", ports[0], ports[1])
	cmds := []struct {
		name string
		args []string
	}{
		{"master", []string{"master", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-port=" + itoa(ports[0]), "-port.grpc=" + itoa(ports[1]),
			"-mdir=master", "-telemetry=false", "-volumeSizeLimitMB=64"}},
		{"volume", []string{"volume", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-port=" + itoa(ports[2]), "-port.grpc=" + itoa(ports[3]),
			"-dir=volume", "-master=" + master, "-max=1000", "-preStopSeconds=0"}},
		{"filer", []string{"filer", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-port=" + itoa(ports[4]), "-port.grpc=" + itoa(ports[5]),
			"-master=" + master, "-localSocket=" + filepath.Join(dir, "filer.sock"), "-defaultStoreDir=filer"}},
		{"s3", []string{"s3", "-ip.bind=127.0.0.1", "-port=" + itoa(ports[6]), "-port.grpc=" + itoa(ports[7]),
			"-filer=" + fmt.Sprintf("127.0.0.1:%d.%d", ports[4], ports[5]), "-config=s3.json",
			"-localSocket=" + filepath.Join(dir, "s3.sock"), "-port.iceberg=0", "-port.lance=0"}},
	}
	for i, c := range cmds {
		if c.name == "s3" {
			// The gateway backs off for seconds when the filer does
			// not answer yet: start it once the filer's gRPC port does.
			if err := s.await(ports[5], s.procs[i-1]); err != nil {
				s.Stop()
				return nil, err
			}
		}
		log, err := os.Create(filepath.Join(dir, c.name+".log"))
		if err != nil {
			s.Stop()
			return nil, err
		}
		cmd := exec.Command(bin, c.args...)
		cmd.Dir = dir
		// Each bucket is a collection of its own, for which the master
		// grows 7 volumes at a time by default: one is plenty, and keeps
		// a server of many tests' buckets within its volumes.
		cmd.Env = append(os.Environ(), "WEED_MASTER_VOLUME_GROWTH_COPY_1=1")
		cmd.Stdout, cmd.Stderr = log, log
		cmd.WaitDelay = stopTimeout
		err = startProcess(cmd)
		log.Close()
		if err != nil {
			s.Stop()
			return nil, fmt.Errorf("starting weed %s: %w", c.name, err)
		}
		p := &proc{name: c.name, cmd: cmd, exited: make(chan struct{})}
		go func() {
			cmd.Wait()
			close(p.exited)
		}()
		s.procs = append(s.procs, p)
	}
	if err := s.ready(); err != nil {
		logs := s.logTail()
		s.Stop()
		return nil, fmt.Errorf("%w%s", err, logs)
	}
	return s, nil
}

// ready waits until the gateway creates a bucket and stores an object in
// it with this server's credentials (a process that failed to bind must
// not pass for ready on the answers of whoever holds the port: that one
// does not know the credentials), or until a process exits.
func (s *Server) ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	c := s.Client(s.Endpoint())
	bucket, key := "ready", "ready"
	var err error
	for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, 200*time.Millisecond) {
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = c.CreateBucket(actx, &s3.CreateBucketInput{Bucket: &bucket})
		if err == nil || strings.Contains(err.Error(), "BucketAlreadyOwnedByYou") {
			_, err = c.PutObject(actx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader([]byte("ready"))})
		}
		acancel()
		if err == nil {
			return nil
		}
		for _, p := range s.procs {
			select {
			case <-p.exited:
				return fmt.Errorf("weed %s exited: %v", p.name, p.cmd.ProcessState)
			default:
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("S3 gateway on port %d not ready after %v: %w", s.s3Port, readyTimeout, err)
		case <-time.After(backoff):
		}
	}
}

// await waits until port accepts connections, or p exits.
func (s *Server) await(port int, p *proc) error {
	deadline := time.Now().Add(readyTimeout)
	for backoff := 5 * time.Millisecond; ; backoff = min(2*backoff, 100*time.Millisecond) {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+itoa(port), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("weed %s exited: %v%s", p.name, p.cmd.ProcessState, s.logTail())
		case <-time.After(backoff):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("weed %s: port %d not open after %v", p.name, port, readyTimeout)
		}
	}
}

// logTail returns the last lines of each process's log, for an error.
func (s *Server) logTail() string {
	var b strings.Builder
	for _, p := range s.procs {
		out, _ := os.ReadFile(filepath.Join(s.dir, p.name+".log"))
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		fmt.Fprintf(&b, "\n--- weed %s (last lines):\n%s", p.name, strings.Join(lines[max(0, len(lines)-8):], "\n"))
	}
	return b.String()
}

// Stop kills the processes, gateway first, and removes the data.
func (s *Server) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	}
	os.RemoveAll(s.dir)
}

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
// weed cannot pick its own ports (it announces them), so a port may be
// taken before it binds: start then fails and New tries other ports.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func itoa(n int) string { return strconv.Itoa(n) }

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// startProcess starts cmd so that it is killed when the test binary dies,
// however it dies (Linux: PR_SET_PDEATHSIG). The signal follows the
// thread that forked, so every fork happens on one goroutine locked to
// its thread for the life of the process (as internal/redisproc does).
func startProcess(cmd *exec.Cmd) error {
	setDeathSignal(cmd)
	forkerOnce.Do(func() { go forker() })
	done := make(chan error, 1)
	forks <- fork{cmd, done}
	return <-done
}

type fork struct {
	cmd  *exec.Cmd
	done chan<- error
}

var (
	forkerOnce sync.Once
	forks      = make(chan fork)
)

func forker() {
	runtime.LockOSThread()
	for f := range forks {
		f.done <- f.cmd.Start()
	}
}
