// Package redisproc starts and stops redis-server processes on loopback
// ports, for the tests (internal/redistest) and for fencelock demo:
//
//   - on a random free 127.0.0.1 port, tried again on another if the
//     server cannot bind it (another process took it between the probe
//     and the bind; redis-server cannot pick its own: port 0 disables TCP);
//   - configured on standard input, or by a file that Sentinel can rewrite;
//   - ready once the process itself answers: a server that failed to bind
//     must not pass for ready on the answers of whoever holds the port;
//   - killed by the kernel when the program that started it dies (Linux),
//     and stopped with SIGTERM, then SIGKILL if it does not exit.
package redisproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options configure the servers that Start and StartOn start.
type Options struct {
	// Bin is the redis-server executable, looked up on PATH.
	// Default: "redis-server".
	Bin string

	// Dir is the server's working directory. Required.
	Dir string

	// Config returns the configuration of a server listening on port,
	// as redis.conf lines. Required.
	Config func(port int) string

	// ConfigFile, if set, is the name of a configuration file in Dir,
	// written with Config's text unless it exists already, and passed to
	// the server as its first argument, before Args. Sentinel needs it: it
	// rewrites its configuration, which it cannot do to standard input.
	// Default: "" (the configuration goes to standard input).
	ConfigFile string

	// Args are more arguments for the server, after the configuration,
	// e.g. "--sentinel".
	Args []string

	// Log receives the server's standard output and error.
	// Default: nil (discarded).
	Log io.Writer

	// Client returns the options with which to reach a server on port,
	// for the readiness check: TLS, if it listens on TLS only.
	// Default: plain TCP to 127.0.0.1:port.
	Client func(port int) *redis.Options

	// Env holds more environment variables for the server, "KEY=value",
	// after the parent's own (e.g. LD_PRELOAD for libfaketime).
	// Default: nil (the parent's environment).
	Env []string

	// Setpgid starts the server in a process group of its own, so that
	// signals meant for its parent's group (Ctrl-C at a terminal) do not
	// reach it: the parent stops it when it is done with it.
	Setpgid bool
}

// Attempts is how many ports Start tries before it gives up.
const Attempts = 5

// readyTimeout bounds how long a server may take to answer after it was
// started, and stopTimeout how long it may take to exit after a signal.
const (
	readyTimeout = 10 * time.Second
	stopTimeout  = 5 * time.Second
)

// Process is a running (or exited) redis-server.
type Process struct {
	port   int
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts a server on a free 127.0.0.1 port and returns once it
// answers. If the server exits before it answers (most likely because
// another process took the port first), Start tries another port, up to
// Attempts times. It gives up at once when ctx ends.
func Start(ctx context.Context, o *Options) (*Process, error) {
	var err error
	for range Attempts {
		var port int
		if port, err = FreePort(); err != nil {
			return nil, err
		}
		var p *Process
		if p, err = StartOn(ctx, port, o); err == nil {
			return p, nil
		}
		if ctx.Err() != nil || errors.Is(err, exec.ErrNotFound) {
			break
		}
	}
	return nil, err
}

// StartOn starts a server on port and returns once it answers PING as
// the process started (INFO's process_id): not a server that held the
// port before. A server that does not answer within 10s is killed.
func StartOn(ctx context.Context, port int, o *Options) (*Process, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	bin := o.Bin
	if bin == "" {
		bin = "redis-server"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%s is not on PATH: %w", bin, err)
	}
	var cmd *exec.Cmd
	if o.ConfigFile != "" {
		file := filepath.Join(o.Dir, o.ConfigFile)
		if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
			if err := os.WriteFile(file, []byte(o.Config(port)), 0o600); err != nil {
				return nil, err
			}
		}
		cmd = exec.Command(path, append([]string{file}, o.Args...)...)
	} else {
		cmd = exec.Command(path, append([]string{"-"}, o.Args...)...)
		cmd.Stdin = strings.NewReader(o.Config(port))
	}
	cmd.Dir = o.Dir
	if o.Env != nil {
		cmd.Env = append(os.Environ(), o.Env...)
	}
	cmd.Stdout, cmd.Stderr = o.Log, o.Log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: o.Setpgid}
	// Output goes through pipes, which a process the server forked (a
	// background save) may hold open after the server exited: Exited must
	// not wait for it.
	cmd.WaitDelay = stopTimeout
	if err := startProcess(cmd); err != nil {
		return nil, err
	}
	p := &Process{port: port, cmd: cmd, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.exited)
	}()

	opts := &redis.Options{Addr: p.Addr()}
	if o.Client != nil {
		opts = o.Client(port)
	}
	opts.MaxRetries, opts.DialTimeout = -1, time.Second
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	for backoff := 5 * time.Millisecond; ; backoff = min(2*backoff, 100*time.Millisecond) {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		err := answers(actx, rdb, cmd.Process.Pid)
		cancel()
		if err == nil {
			return p, nil
		}
		retry := time.NewTimer(backoff)
		select {
		case <-p.exited:
			retry.Stop()
			return nil, fmt.Errorf("redis-server on port %d exited: %v", port, cmd.ProcessState)
		case <-ctx.Done():
			retry.Stop()
			p.Stop(syscall.SIGKILL)
			return nil, context.Cause(ctx)
		case <-deadline.C:
			retry.Stop()
			p.Stop(syscall.SIGKILL)
			return nil, fmt.Errorf("redis-server on port %d not ready after %v: %w", port, readyTimeout, err)
		case <-retry.C:
		}
	}
}

// answers returns nil if the server at rdb's address answers and is the
// process pid. Servers started at once may be handed the same free port:
// the one that fails to bind must not pass for ready on the other's
// answers, but exit and try another port.
func answers(ctx context.Context, rdb *redis.Client, pid int) error {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			if v != strconv.Itoa(pid) {
				return fmt.Errorf("the port is answered by process %s, not %d", v, pid)
			}
			return nil
		}
	}
	return errors.New("INFO server has no process_id")
}

// FreePort returns a TCP port that was free on 127.0.0.1 a moment ago.
// Another process may take it before a server binds it: see Start.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Port returns the server's TCP port.
func (p *Process) Port() int { return p.port }

// Addr returns the server's address, "127.0.0.1:port".
func (p *Process) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }

// Pid returns the server's process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited returns a channel that is closed once the server has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Signal sends sig to the server.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Stop sends sig, after SIGCONT so that a stopped (SIGSTOP) server can
// act on it, and waits until the server has exited, sending SIGKILL if it
// has not within 5s.
func (p *Process) Stop(sig syscall.Signal) {
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Signal(sig)
	timeout := time.NewTimer(stopTimeout)
	defer timeout.Stop()
	select {
	case <-p.exited:
	case <-timeout.C:
		p.cmd.Process.Kill()
		<-p.exited
	}
}
