package node

import (
	"fmt"
	"os"
	"testing"

	"github.com/fencelock/fencelock/internal/redistest"
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
func testConfig() *Config { return DefaultConfig() }
