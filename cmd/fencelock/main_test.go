package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
)

// childEnv selects what the test binary does when run re-executes it as
// COMMAND, as os/exec's own tests do.
const childEnv = "FENCELOCK_TEST_CHILD"

// mainEnv makes the test binary act as the fencelock command itself.
const mainEnv = "FENCELOCK_TEST_MAIN"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == guardArg { // run's guard, re-executed
		os.Exit(guardMain(os.Args[2:]))
	}
	// The race detector makes a program that started a child sleep 1s
	// before exiting (atexit_sleep_ms): the guard, COMMAND and fencelock
	// run by these tests would exit late.
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	logging.Disable() // go-redis dial and pool logs would bury the failures
	if os.Getenv(mainEnv) != "" {
		os.Unsetenv(mainEnv) // COMMAND, started by this main, is a child
		main()
	}
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

// child is COMMAND in the tests. It writes what the test waits for to
// stdout, which run copies into the test's buffer.
func child(mode string) int {
	switch mode {
	case "env": // print what fencelock put in the environment
		for _, k := range []string{"FENCELOCK_NAME", "FENCELOCK_TOKEN", "FENCELOCK_TERM", "FENCELOCK_LEASE", "FENCELOCK_FENCE", "FENCELOCK_SLOT", "FENCELOCK_LOCK", "FENCELOCK_SECRET", "FENCELOCK_SECRET_FILE"} {
			if v, ok := os.LookupEnv(k); ok {
				fmt.Printf("%s=%s\n", k, v)
			}
		}
		return 0
	case "args": // print each argument after the test binary's flag, one a line
		for _, a := range os.Args[2:] {
			fmt.Println(a)
		}
		return 0
	case "exit": // exit with the status in FENCELOCK_TEST_CODE
		n, err := strconv.Atoi(os.Getenv("FENCELOCK_TEST_CODE"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 99
		}
		return n
	case "environ": // print the whole environment, then as ignore-term
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
		signal.Ignore(syscall.SIGTERM)
		fmt.Printf("ready %d %d\n", os.Getpid(), os.Getppid())
		time.Sleep(time.Hour)
		return 0
	case "ignore-term": // survive SIGTERM; only SIGKILL ends it
		signal.Ignore(syscall.SIGTERM)
		fmt.Printf("ready %d %d\n", os.Getpid(), os.Getppid())
		time.Sleep(time.Hour)
		return 0
	case "trap": // report the first signal, exit 3
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		fmt.Printf("ready %d\n", os.Getpid())
		s := <-c
		fmt.Printf("got %v\n", s)
		return 3
	case "term-trap": // as trap, saying its term (elect) when ready
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		fmt.Printf("ready %d %s %s\n", os.Getpid(), os.Getenv("FENCELOCK_TERM"), os.Getenv("FENCELOCK_TOKEN"))
		s := <-c
		fmt.Printf("got %v\n", s)
		return 3
	case "count-trap": // as trap, counting the COMMANDs that run in Redis
		// The count goes up before "ready" and down before the exit,
		// which comes before run releases the permit: a COMMAND that
		// started while N others ran sees more than N.
		rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("FENCELOCK_TEST_REDIS")})
		defer rdb.Close()
		ctx, key := context.Background(), os.Getenv("FENCELOCK_TEST_KEY")
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		n, err := rdb.Incr(ctx, key).Result()
		if err != nil {
			fmt.Println(err)
			return 99
		}
		fmt.Printf("ready %d slot %s running %d\n", os.Getpid(), os.Getenv("FENCELOCK_SLOT"), n)
		<-c
		if err := rdb.Decr(ctx, key).Err(); err != nil {
			fmt.Println(err)
			return 99
		}
		return 3
	case "ttin-loop": // as trap, after stopping itself (SIGTTIN) FENCELOCK_TEST_STOPS times
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		n, err := strconv.Atoi(os.Getenv("FENCELOCK_TEST_STOPS"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 99
		}
		fmt.Printf("ready %d\n", os.Getpid())
		// To this thread: it stops before the call returns, where a signal
		// to the process may be taken by another thread later, and two
		// pending ones are one.
		runtime.LockOSThread()
		for range n {
			syscall.Tgkill(os.Getpid(), syscall.Gettid(), syscall.SIGTTIN) // stops it until continued
		}
		fmt.Println("stopped enough")
		s := <-c
		fmt.Printf("got %v\n", s)
		return 3
	case "stop-self": // as trap, but stopped (SIGSTOP) before waiting
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		fmt.Printf("ready %d\n", os.Getpid())
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		s := <-c
		fmt.Printf("got %v\n", s)
		return 3
	case "read-stdin", "read-stdin-ignore-int": // read a line from standard input (a terminal, say)
		if mode == "read-stdin-ignore-int" {
			signal.Ignore(syscall.SIGINT)
		}
		fmt.Printf("ready %d\n", os.Getpid())
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil {
			fmt.Printf("read error %v\n", err)
			return 1
		}
		fmt.Printf("read %s", line)
		return 0
	case "sleep": // run for FENCELOCK_TEST_SLEEP, then exit 0
		d, err := time.ParseDuration(os.Getenv("FENCELOCK_TEST_SLEEP"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 99
		}
		time.Sleep(d)
		return 0
	case "check-dead": // exit 0 if no process of FENCELOCK_TEST_PIDS runs
		for f := range strings.FieldsSeq(os.Getenv("FENCELOCK_TEST_PIDS")) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				fmt.Println(err)
				return 99
			}
			if alive(pid) {
				fmt.Printf("alive %d\n", pid)
				return 1
			}
		}
		fmt.Println("all dead")
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown %s=%q\n", childEnv, mode)
	return 99
}

// output is a concurrency-safe buffer that tests can wait on.
type output struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newOutput() *output { return &output{changed: make(chan struct{})} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	close(o.changed)
	o.changed = make(chan struct{})
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// waitFor waits until the output contains s, failing the test after a
// generous timeout. Call it from the test goroutine only.
func (o *output) waitFor(t testing.TB, s string) {
	t.Helper()
	o.waitForN(t, s, 1)
}

// waitForN waits until the output contains s n times, as waitFor.
func (o *output) waitForN(t testing.TB, s string, n int) {
	t.Helper()
	timeout := time.NewTimer(15 * time.Second)
	defer timeout.Stop()
	for {
		o.mu.Lock()
		has, changed := strings.Count(o.buf.String(), s) >= n, o.changed
		o.mu.Unlock()
		if has {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("output never contained %q %d times; got:\n%s", s, n, o.String())
		}
	}
}

// harness runs the command in-process with its own environment, standard
// input and signal channel, so tests can run in parallel.
type harness struct {
	t              testing.TB
	env            map[string]string // what getenv sees; nothing from the real environment
	childEnv       []string          // added to the real environment for COMMAND
	stdin          string
	stdout, stderr *output
	sigc           chan chan<- os.Signal // run's signal channel, once it asks for one
}

func newHarness(t testing.TB) *harness {
	return &harness{
		t:      t,
		env:    map[string]string{},
		stdout: newOutput(),
		stderr: newOutput(),
		sigc:   make(chan chan<- os.Signal, 1),
	}
}

func (h *harness) cli() *cli {
	return &cli{
		stdin:   strings.NewReader(h.stdin),
		stdout:  h.stdout,
		stderr:  h.stderr,
		getenv:  func(k string) string { return h.env[k] },
		environ: func() []string { return append(os.Environ(), h.childEnv...) },
		notify: func(c chan<- os.Signal) func() {
			h.sigc <- c
			return func() {}
		},
		untilInterrupted: func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithCancel(ctx) // the test's context interrupts
		},
	}
}

// run runs the command to completion and returns its exit status.
func (h *harness) run(args ...string) int {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.t.Context(), 60*time.Second)
	defer cancel()
	code := h.cli().main(ctx, args)
	h.t.Logf("fencelock %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, h.stdout, h.stderr)
	return code
}

// start runs the command in a goroutine; the returned channel yields its
// exit status.
func (h *harness) start(args ...string) <-chan int {
	done := make(chan int, 1)
	go func() {
		done <- h.cli().main(h.t.Context(), args)
	}()
	return done
}

// exit waits for a started command's status, bounded.
func (h *harness) exit(done <-chan int) int {
	h.t.Helper()
	select {
	case code := <-done:
		h.t.Logf("exit %d\nstdout:\n%s\nstderr:\n%s", code, h.stdout, h.stderr)
		return code
	case <-time.After(30 * time.Second):
		h.t.Fatalf("command did not exit within 30s\nstdout:\n%s\nstderr:\n%s", h.stdout, h.stderr)
		return -1
	}
}

// signal delivers s to the running command as if fencelock had received it.
func (h *harness) signal(s os.Signal) {
	h.t.Helper()
	select {
	case c := <-h.sigc:
		c <- s
		h.sigc <- c
	case <-time.After(15 * time.Second):
		h.t.Fatalf("run never subscribed to signals")
	}
}

func redisURL(s *redistest.Server) string { return "redis://" + s.Addr() }

// self is COMMAND in run's tests: this test binary, in child mode.
func (h *harness) self(mode string) []string {
	h.childEnv = append(h.childEnv, childEnv+"="+mode)
	return []string{os.Args[0], "-test.run=^$"}
}
