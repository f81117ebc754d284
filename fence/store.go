package fence

import "context"

// A Store keeps values that only the current holder of a lock may change,
// one value and one fence per resource. Resource names are opaque: any
// string, including the empty one, names a resource, and names are
// compared byte for byte.
//
// Every fenced method applies the rule of Check and records the fence in
// the same atomic step as the access itself; that is the whole point of a
// Store. A fence that fails Validate gives an error wrapping ErrInvalid,
// a refused one a *StaleError wrapping ErrStale, and neither changes
// anything. A Store does not tell a missing value from an empty one.
//
// Implementations are safe for concurrent use.
type Store interface {
	// Put sets the value of resource if f is accepted.
	Put(ctx context.Context, resource string, f Fence, value []byte) error

	// Get is a fenced read: it returns the value of resource if f is
	// accepted, and records f, so that no older holder can write after
	// this read. Use it for values the holder will act on.
	Get(ctx context.Context, resource string, f Fence) ([]byte, error)

	// Load is an unfenced read: it returns the value and the current fence
	// of resource, the zero Fence if none was accepted. It changes nothing,
	// so its result may be outdated as soon as it returns.
	Load(ctx context.Context, resource string) ([]byte, Fence, error)

	// Delete removes the value of resource if f is accepted. The fence is
	// kept: forgetting it would let an older holder write again.
	Delete(ctx context.Context, resource string, f Fence) error
}
