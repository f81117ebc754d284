package fencelock_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9/logging"
)

// redisAddr is the server that Example functions share; tests start their
// own.
var redisAddr string

func TestMain(m *testing.M) {
	logging.Disable() // go-redis dial and pool logs would bury the failures
	s, err := redistest.Launch(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	redisAddr = s.Addr()
	code := m.Run()
	s.Close()
	if code == 0 {
		if leaked := leakedGoroutines(); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines left behind after the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines returns the stacks of fencelock goroutines still
// running (lease keepers, deadline timers, subscription readers), waiting
// briefly for those that are on their way out.
func leakedGoroutines() string {
	var leaked []string
	for range 50 {
		leaked = leaked[:0]
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if strings.Contains(g, "fencelock.(*") && !strings.Contains(g, "leakedGoroutines") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return ""
		}
		time.Sleep(20 * time.Millisecond)
	}
	return strings.Join(leaked, "\n\n")
}
