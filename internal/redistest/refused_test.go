package redistest_test

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
)

// A refused address refuses connections, and nothing can listen on its
// port while the test runs.
func TestRefusedAddr(t *testing.T) {
	t.Parallel()
	addr := redistest.RefusedAddr(t)
	if _, err := net.DialTimeout("tcp", addr, 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial %s: error = %v, want ECONNREFUSED", addr, err)
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Errorf("listen on %s succeeded, want the port taken", addr)
	}
}
