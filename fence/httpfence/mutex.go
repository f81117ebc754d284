package httpfence

import (
	"context"
	"sync"
)

// keyedMutex is one mutex per resource name, kept only while someone
// holds or waits for it. Waiting ends with the request's context, so a
// client that gives up does not leave a handler queued.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	ch    chan struct{} // holds one value while locked
	users int           // holders and waiters, guarded by keyedMutex.mu
}

// lock locks the mutex of key and returns the function that unlocks it,
// or ctx's error if ctx ends first.
func (k *keyedMutex) lock(ctx context.Context, key string) (unlock func(), err error) {
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

func (k *keyedMutex) release(key string, l *keyLock) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l.users--; l.users == 0 {
		delete(k.m, key)
	}
}
