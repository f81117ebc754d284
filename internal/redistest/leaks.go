package redistest

import (
	"runtime"
	"strings"
	"time"
)

// Leaks returns the stacks of the library's goroutines still running
// after a package's tests (lease keepers, batch senders, subscription
// readers, quorum requests), waiting briefly for those on their way out;
// "" if there are none. A TestMain calls it once every test has passed.
func Leaks() string {
	var leaked []string
	for range 50 {
		leaked = leaked[:0]
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if ours(g) && !strings.Contains(g, "redistest.Leaks") {
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

// ours reports whether goroutine g's stack runs the library's code: the
// root package's methods or its internal packages'.
func ours(g string) bool {
	for _, p := range []string{"fencelock.(*", "fencelock/internal/node.", "fencelock/internal/quorum.",
		"fencelock/internal/script.", "fencelock/internal/wake.", "fencelock/transport."} {
		if strings.Contains(g, p) {
			return true
		}
	}
	return false
}
