package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/fencelock/fencelock/internal/redisproc"
)

// localRedis is a redis-server that demo starts for itself
// (internal/redisproc, as the tests do): on a free 127.0.0.1 port,
// configured on standard input, keeping nothing on disk, killed with
// fencelock if fencelock dies (Linux).
type localRedis struct {
	proc *redisproc.Process
	dir  string
}

// startRedis starts redis-server from PATH and waits until it answers.
func startRedis(ctx context.Context) (*localRedis, error) {
	dir, err := os.MkdirTemp("", "fencelock-demo-")
	if err != nil {
		return nil, err
	}
	log := &lockedBuffer{}
	p, err := redisproc.Start(ctx, &redisproc.Options{
		Dir: dir,
		Config: func(port int) string {
			return strings.Join([]string{
				"bind 127.0.0.1",
				"port " + strconv.Itoa(port),
				`save ""`,
				"appendonly no",
				"dir " + dir,
				`logfile ""`,
			}, "\n") + "\n"
		},
		Log: log,
		// A Ctrl-C at the terminal reaches fencelock, which stops the
		// server after cleaning up, not the server directly.
		Setpgid: true,
	})
	if err != nil {
		os.RemoveAll(dir)
		switch {
		case errors.Is(err, exec.ErrNotFound):
			return nil, fmt.Errorf("redis-server is not on PATH (install it, e.g. with `make redis`, or give --redis URL): %w", err)
		case ctx.Err() != nil:
			return nil, err
		}
		return nil, fmt.Errorf("%w\n%s", err, log)
	}
	return &localRedis{proc: p, dir: dir}, nil
}

// addr returns the server's address.
func (r *localRedis) addr() string { return r.proc.Addr() }

// close stops the server (SIGTERM, SIGKILL after 5s), waits for it, and
// removes its directory.
func (r *localRedis) close() {
	r.proc.Stop(syscall.SIGTERM)
	os.RemoveAll(r.dir)
}

// version returns the server's version line, e.g. "redis-server 7.0.15".
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
