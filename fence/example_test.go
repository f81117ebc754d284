package fence_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/fence"
)

// A holder whose lease has been taken over is refused, and learns the
// newer token.
func Example() {
	ctx := context.Background()
	var store fence.Memory

	old := fence.Fence{Lock: "orders:42", Token: 1764431234567890, Lease: "k3J9x"}
	newer := fence.Fence{Lock: "orders:42", Token: 1764431299000000, Lease: "p0Qr7"}

	fmt.Println(store.Put(ctx, "orders/42", old, []byte("paid")))
	fmt.Println(store.Put(ctx, "orders/42", newer, []byte("shipped")))

	err := store.Put(ctx, "orders/42", old, []byte("refunded"))
	var stale *fence.StaleError
	if errors.As(err, &stale) {
		fmt.Println("refused; current token:", stale.Current.Token)
	}
	value, current, _ := store.Load(ctx, "orders/42")
	fmt.Printf("%s by %d\n", value, current.Token)
	// Output:
	// <nil>
	// <nil>
	// refused; current token: 1764431299000000
	// shipped by 1764431299000000
}

// A fenced read records the reader's fence, so a holder with an older
// token cannot write between the read and the write that depends on it.
func ExampleMemory_Get() {
	ctx := context.Background()
	var store fence.Memory
	a := fence.Fence{Lock: "counter", Token: 1, Lease: "a"}
	b := fence.Fence{Lock: "counter", Token: 2, Lease: "b"}

	_ = store.Put(ctx, "counter", a, []byte("1"))
	n, _ := store.Get(ctx, "counter", b) // b reads, to add one
	err := store.Put(ctx, "counter", a, []byte("100"))
	fmt.Println(errors.Is(err, fence.ErrStale))
	fmt.Println(store.Put(ctx, "counter", b, append(n, '+', '1')))
	v, _, _ := store.Load(ctx, "counter")
	fmt.Println(string(v))
	// Output:
	// true
	// <nil>
	// 1+1
}

func ExampleParse() {
	f, err := fence.Parse(`"1764431234567890";lock="orders:42";lease="k3J9x"`)
	fmt.Println(f.Lock, f.Token, f.Lease, err)

	// The deprecated form, accepted until v1.0.0.
	f, err = fence.Parse(`1764431234567890;lock="orders:42";lease="k3J9x"`)
	fmt.Println(f.Lock, f.Token, f.Lease, err)

	_, err = fence.Parse(`"0";lock="orders:42";lease="k3J9x"`)
	fmt.Println(errors.Is(err, fence.ErrInvalid))
	// Output:
	// orders:42 1764431234567890 k3J9x <nil>
	// orders:42 1764431234567890 k3J9x <nil>
	// true
}

func ExampleFence_String() {
	f := fence.Fence{Lock: "orders:42", Token: 1764431234567890, Lease: "k3J9x"}
	fmt.Println(f)
	// Output: "1764431234567890";lock="orders:42";lease="k3J9x"
}
