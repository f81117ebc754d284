package redistest_test

import (
	"os"
	"testing"

	"github.com/redis/go-redis/v9/logging"
)

func TestMain(m *testing.M) {
	logging.Disable() // go-redis dial and pool logs would bury the failures
	os.Exit(m.Run())
}
