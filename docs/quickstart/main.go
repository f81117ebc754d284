// Command quickstart is the README's Go quick start: it compiles as the
// README shows it (TestREADME_quickStart keeps the two the same).
package main

import (
	"context"
	"log"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/redisfence"
	"github.com/redis/go-redis/v9"
)

func main() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	locks := fencelock.New(rdb, nil)  // leases of 10s, renewed in the background
	store := redisfence.New(rdb, nil) // the protected resource: it checks every fence

	err := locks.Do(ctx, "orders:42", func(ctx context.Context, f fence.Fence) error {
		// f carries this lease's token: once a newer holder wrote, the store
		// rejects it (fence.ErrStale), however late this write arrives.
		return store.Put(ctx, "orders/42", f, []byte("shipped"))
	})
	if err != nil {
		log.Fatal(err)
	}
}
