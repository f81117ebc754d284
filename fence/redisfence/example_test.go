package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/redisfence"
	"github.com/fencelock/fencelock/internal/redistest"
)

// redisAddr is the address of the redis-server the examples share.
var redisAddr string

func TestMain(m *testing.M) {
	logging.Disable() // go-redis dial and pool logs would bury the failures
	srv, err := redistest.Launch(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "redisfence tests:", err)
		os.Exit(1)
	}
	redisAddr = srv.Addr()
	code := m.Run()
	srv.Close()
	os.Exit(code)
}

func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: redisAddr})
	defer rdb.Close()
	store := redisfence.New(rdb, &redisfence.Options{Prefix: "example:"})

	old := fence.Fence{Lock: "orders:42", Token: 1764431234567890, Lease: "k3J9x"}
	newer := fence.Fence{Lock: "orders:42", Token: 1764431299000000, Lease: "p0Qr7"}
	fmt.Println(store.Put(ctx, "orders/42", old, []byte("paid")))
	fmt.Println(store.Put(ctx, "orders/42", newer, []byte("shipped")))

	err := store.Put(ctx, "orders/42", old, []byte("refunded"))
	fmt.Println(errors.Is(err, fence.ErrStale))
	fmt.Println(err)

	value, current, _ := store.Load(ctx, "orders/42")
	fmt.Printf("%s by %d\n", value, current.Token)
	// Output:
	// <nil>
	// <nil>
	// true
	// redisfence: put "orders/42": fence: stale token: token 1764431234567890 is older than current token 1764431299000000
	// shipped by 1764431299000000
}
