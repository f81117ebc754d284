package fencelock_test

import (
	"fmt"
	"os"
	"testing"

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
		if leaked := redistest.Leaks(); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines left behind after the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}
