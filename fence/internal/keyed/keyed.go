// Package keyed provides the per-resource mutex that the fence
// middlewares (httpfence, grpcfence) hold across check and handler.
package keyed

import (
	"context"
	"sync"
)

// Mutex is one mutex per key (a resource name), kept only while someone
// holds or waits for it. Waiting ends with the caller's context, so a
// client that gives up does not leave a handler queued. The zero value is
// ready to use; a Mutex must not be copied after first use.
type Mutex struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	ch    chan struct{} // holds one value while locked
	users int           // holders and waiters, guarded by Mutex.mu
}

// Lock locks the mutex of key and returns the function that unlocks it,
// or ctx's error if ctx ends first.
func (k *Mutex) Lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	if k.m == nil {
		k.m = make(map[string]*keyLock)
	}
	l := k.m[key]
	if l == nil {
		l = &keyLock{ch: make(chan struct{}, 1)}
		k.m[key] = l
	}
	l.users++
	k.mu.Unlock()

	select {
	case l.ch <- struct{}{}:
		return func() {
			<-l.ch
			k.release(key, l)
		}, nil
	case <-ctx.Done():
		k.release(key, l)
		return nil, ctx.Err()
	}
}

func (k *Mutex) release(key string, l *keyLock) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l.users--; l.users == 0 {
		delete(k.m, key)
	}
}
