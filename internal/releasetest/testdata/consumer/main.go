// A consumer of every published module, built from the module proxy.
package main

import (
	"context"
	"fmt"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/grpcfence"
	"github.com/fencelock/fencelock/fence/s3fence"
	"github.com/fencelock/fencelock/fence/sqlfence"
	"github.com/fencelock/fencelock/fenceotel"
	"github.com/fencelock/fencelock/fenceprom"
)

func main() {
	ddl, err := sqlfence.FencesDDL(sqlfence.SQLite, "fences")
	interceptor := grpcfence.UnaryClientInterceptor(func(ctx context.Context) (fence.Fence, bool) { return fence.Fence{}, false })
	fmt.Println("fencelock:", fencelock.CheckName("orders:42") == nil)
	fmt.Println("sqlfence:", err == nil && ddl != "")
	fmt.Println("grpcfence:", interceptor != nil)
	fmt.Println("s3fence:", s3fence.New(nil, "bucket", nil).Key("orders:42") == "orders:42")
	fmt.Println("fenceprom:", fenceprom.New(nil) != nil)
	fmt.Println("fenceotel:", fenceotel.New(nil) != nil)
}
