package quorum

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/errs"
	"github.com/fencelock/fencelock/internal/node"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/fencelock/fencelock/transport"
	"github.com/redis/go-redis/v9/logging"
)

func TestMain(m *testing.M) {
	logging.Disable() // go-redis dial and pool logs would bury the failures
	code := m.Run()
	if code == 0 {
		if leaked := redistest.Leaks(); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines left behind after the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// testConfig returns the Config of a Client with default Options.
func testConfig() *node.Config { return node.DefaultConfig() }

// A quorum acquisition is valid for the TTL less the drift allowance, not
// the whole TTL: one that took longer than that, even if less than the
// TTL, fails (and releases), since its lease's deadline would already have
// passed.
func TestQuorum_inTimeSubtractsDrift(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	cfg := testConfig()
	q := New([]*node.Node{node.New(transport.GoRedis(s.Client(t)), cfg), node.New(transport.GoRedis(s.Client(t)), cfg), node.New(transport.GoRedis(s.Client(t)), cfg)}, cfg)
	ctx := t.Context()
	var r node.Ref
	cfg.SetRef(&r, node.Lock, "in-time", "")
	spent := cfg.TTL - cfg.Drift/2 // past the validity, within the TTL
	if _, _, err := q.inTime(ctx, &r, time.Now().Add(-spent), 7); !errors.Is(err, errs.ErrNotAcquired) {
		t.Errorf("inTime after %v of TTL %v (drift %v): error = %v, want ErrNotAcquired", spent, cfg.TTL, cfg.Drift, err)
	}
	if token, _, err := q.inTime(ctx, &r, time.Now().Add(-time.Second), 7); err != nil || token != 7 {
		t.Errorf("inTime after 1s of TTL %v: %d, %v; want 7, nil", cfg.TTL, token, err)
	}
}
