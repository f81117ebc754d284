package fence

import (
	"context"
	"fmt"
	"sync"
)

// Memory is a Store kept in process memory, for tests and examples, or for
// a resource that lives in the same process as its only gatekeeper. The
// zero value is ready to use. Values are copied in and out.
type Memory struct {
	mu sync.Mutex
	m  map[string]*memoryEntry
}

type memoryEntry struct {
	fence Fence
	value []byte
}

var _ Store = (*Memory)(nil)

// Put implements Store.
func (m *Memory) Put(ctx context.Context, resource string, f Fence, value []byte) error {
	return m.access(ctx, "put", resource, f, func(e *memoryEntry) {
		e.value = append([]byte{}, value...)
	})
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, resource string, f Fence) ([]byte, error) {
	var value []byte
	err := m.access(ctx, "get", resource, f, func(e *memoryEntry) {
		value = clone(e.value)
	})
	return value, err
}

// Delete implements Store.
func (m *Memory) Delete(ctx context.Context, resource string, f Fence) error {
	return m.access(ctx, "delete", resource, f, func(e *memoryEntry) {
		e.value = nil
	})
}

// Load implements Store.
func (m *Memory) Load(ctx context.Context, resource string) ([]byte, Fence, error) {
	if err := ctx.Err(); err != nil {
		return nil, Fence{}, fmt.Errorf("fence: load %q: %w", resource, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.m[resource]
	if e == nil {
		return nil, Fence{}, nil
	}
	return clone(e.value), e.fence, nil
}

// access runs do on the entry of resource if f is accepted, holding the
// mutex from the check until f is recorded.
// Errors say "fence: OP RESOURCE: ...", as every adapter's say theirs
// ("redisfence: put ...").
func (m *Memory) access(ctx context.Context, op, resource string, f Fence, do func(*memoryEntry)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fence: %s %q: %w", op, resource, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.m[resource]
	var current Fence
	if e != nil {
		current = e.fence
	}
	if err := Check(current, f); err != nil {
		return fmt.Errorf("fence: %s %q: %w", op, resource, err)
	}
	if e == nil {
		if m.m == nil {
			m.m = make(map[string]*memoryEntry)
		}
		e = &memoryEntry{}
		m.m[resource] = e
	}
	e.fence = f
	do(e)
	return nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
