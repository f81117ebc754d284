package redisproc_test

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/fencelock/fencelock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

func options(t *testing.T) *redisproc.Options {
	return &redisproc.Options{
		Dir: t.TempDir(),
		Config: func(port int) string {
			return "bind 127.0.0.1\nport " + strconv.Itoa(port) + "\nsave \"\"\nappendonly no\n"
		},
	}
}

// A started server answers on its port as the process started, in a
// process group of its own with Setpgid, and is gone after Stop.
func TestStart(t *testing.T) {
	t.Parallel()
	o := options(t)
	o.Setpgid = true
	p, err := redisproc.Start(t.Context(), o)
	if err != nil {
		t.Fatalf("Start error = %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			p.Stop(syscall.SIGKILL)
		}
	})
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer rdb.Close()
	info, err := rdb.Info(t.Context(), "server").Result()
	if err != nil {
		t.Fatalf("INFO: %v", err)
	}
	if want := "process_id:" + strconv.Itoa(p.Pid()); !strings.Contains(info, want) {
		t.Errorf("INFO server lacks %q: another process answers %s", want, p.Addr())
	}
	if pgid, err := syscall.Getpgid(p.Pid()); err != nil || pgid != p.Pid() {
		t.Errorf("process group of the server = %d, %v; want its own, %d", pgid, err, p.Pid())
	}
	p.Stop(syscall.SIGTERM)
	stopped = true
	select {
	case <-p.Exited():
	default:
		t.Fatalf("Stop returned before the server exited")
	}
	if err := syscall.Kill(p.Pid(), 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(%d, 0) after Stop = %v, want ESRCH", p.Pid(), err)
	}
}

// A server started on a port that another server holds fails to bind and
// exits; StartOn reports that rather than taking the other's answers for
// its own.
func TestStartOn_portTaken(t *testing.T) {
	t.Parallel()
	a, err := redisproc.Start(t.Context(), options(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(syscall.SIGKILL) })
	b, err := redisproc.StartOn(t.Context(), a.Port(), options(t))
	if err == nil {
		b.Stop(syscall.SIGKILL)
		t.Fatalf("StartOn(%d), a port another server holds, reported ready", a.Port())
	}
}

// A context that ends while the server starts stops it, and the error
// says why.
func TestStart_contextEnded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(t.Context())
	why := errors.New("given up")
	cancel(why)
	if p, err := redisproc.Start(ctx, options(t)); !errors.Is(err, why) {
		if p != nil {
			p.Stop(syscall.SIGKILL)
		}
		t.Fatalf("Start with an ended context: error = %v, want the context's cause", err)
	}
}

func TestStart_notOnPath(t *testing.T) {
	t.Parallel()
	o := options(t)
	o.Bin = "redis-server-that-does-not-exist"
	if _, err := redisproc.Start(t.Context(), o); !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("Start error = %v, want exec.ErrNotFound", err)
	}
}
