package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// localRedis is a redis-server that demo starts for itself: on a free
// 127.0.0.1 port, configured on standard input, keeping nothing on disk.
type localRedis struct {
	addr   string
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
	log    *lockedBuffer
}

// startRedis starts redis-server from PATH and waits until it answers
// PING. The port is free when chosen but may be taken before the server
// binds it, so a server that exits at once is tried again on another.
func startRedis(ctx context.Context) (*localRedis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is not on PATH (install it, e.g. with `make redis`, or give --redis URL): %w", err)
	}
	dir, err := os.MkdirTemp("", "fencelock-demo-")
	if err != nil {
		return nil, err
	}
	for range 5 {
		var r *localRedis
		r, err = launchRedis(ctx, bin, dir)
		if err == nil {
			return r, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	os.RemoveAll(dir)
	return nil, err
}

func launchRedis(ctx context.Context, bin, dir string) (*localRedis, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	config := strings.Join([]string{
		"bind 127.0.0.1",
		"port " + strconv.Itoa(port),
		`save ""`,
		"appendonly no",
		"dir " + dir,
		`logfile ""`,
	}, "\n") + "\n"
	r := &localRedis{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, exited: make(chan struct{}), log: &lockedBuffer{}}
	r.cmd = exec.Command(bin, "-")
	r.cmd.Stdin = strings.NewReader(config)
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	r.cmd.Dir = dir
	// Its own process group: a Ctrl-C at the terminal reaches fencelock,
	// which stops the server after cleaning up, not the server directly.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(r.cmd.SysProcAttr)
	started := make(chan error, 1)
	go func() {
		// The death signal comes when the starting thread exits: this
		// one stays locked to the goroutine until the server has exited.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := r.cmd.Start()
		started <- err
		if err == nil {
			r.cmd.Wait()
			close(r.exited)
		}
	}()
	if err := <-started; err != nil {
		return nil, err
	}

	rdb := redis.NewClient(&redis.Options{Addr: r.addr, MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for backoff := 5 * time.Millisecond; ; backoff = min(2*backoff, 100*time.Millisecond) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err = rdb.Ping(pctx).Err()
		cancel()
		if err == nil {
			return r, nil
		}
		select {
		case <-r.exited:
			return nil, fmt.Errorf("redis-server on port %d exited: %v\n%s", port, r.cmd.ProcessState, r.log)
		case <-ctx.Done():
			r.stop()
			return nil, context.Cause(ctx)
		case <-deadline.C:
			r.stop()
			return nil, fmt.Errorf("redis-server on port %d not ready after 10s: %w", port, err)
		case <-time.After(backoff):
		}
	}
}

// stop shuts the server down (SIGTERM, SIGKILL after 5s) and waits for it.
func (r *localRedis) stop() {
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(5 * time.Second):
		r.cmd.Process.Kill()
		<-r.exited
	}
}

// close stops the server and removes its directory.
func (r *localRedis) close() {
	r.stop()
	os.RemoveAll(r.dir)
}

// version returns the server's version line, e.g. "Redis 7.0.15".
func (r *localRedis) version() string {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		return "redis-server"
	}
	// "Redis server v=7.0.15 sha=..."
	for f := range strings.FieldsSeq(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return "redis-server " + v
		}
	}
	return "redis-server"
}

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
// (redis-server cannot pick one itself: port 0 disables TCP.)
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	if a, ok := l.Addr().(*net.TCPAddr); ok {
		return a.Port, nil
	}
	return 0, errors.New("not a TCP address")
}

// lockedBuffer collects a process's output from two pipes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
