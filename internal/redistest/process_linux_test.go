package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary run TestServerChild, which starts a
// server for TestServer_diesWithTestProcess and waits to be killed.
const childEnv = "REDISTEST_CHILD"

// A test binary that dies without running its cleanup (killed after a
// hang, say) takes its servers with it; threads ending inside it do not.
func TestServer_diesWithTestProcess(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerChild$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	// The child waits for its standard input to end, so it does not
	// outlive this test if this test dies first.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var pid int
	var seen []string
	timeout := time.After(30 * time.Second)
	for pid == 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the child exited before starting its server:\n%s", strings.Join(seen, "\n"))
			}
			seen = append(seen, l)
			if p, ok := strings.CutPrefix(l, "server pid "); ok {
				if pid, err = strconv.Atoi(p); err != nil {
					t.Fatalf("child said %q", l)
				}
			}
		case <-timeout:
			t.Fatalf("no server pid from the child within 30s:\n%s", strings.Join(seen, "\n"))
		}
	}
	if !alive(pid) {
		t.Fatalf("server %d is not running while the child lives", pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	go func() {
		for range lines { // drain, so the reader can end
		}
	}()
	WaitFor(t, 10*time.Second, fmt.Sprintf("server %d to die with its test process", pid), func() bool { return !alive(pid) })
}

// TestServerChild is the child of TestServer_diesWithTestProcess: it
// starts a server, ends threads (as goroutines locked to their thread do
// when they return), checks that the server survived them, prints its
// pid and waits to be killed (or for its standard input to end).
func TestServerChild(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("runs as the child process of TestServer_diesWithTestProcess")
	}
	s := Start(t, nil)
	var wg sync.WaitGroup
	for range 4 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		})
	}
	wg.Wait()
	if err := s.Client(t).Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING after threads ended: %v", err)
	}
	s.mu.Lock()
	pid := s.proc.Pid()
	s.mu.Unlock()
	fmt.Printf("server pid %d\n", pid)
	io.Copy(io.Discard, os.Stdin)
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces, the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
