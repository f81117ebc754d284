package rueidisconn

import (
	"context"
	"sync"

	"github.com/fencelock/fencelock/transport"
	"github.com/redis/rueidis"
)

// Track tracks keys on a dedicated connection, whose invalidations rueidis
// reads as they come (RESP3 push messages). Not on a Cluster: rueidis does
// not say which master serves a key, and a dedicated connection serves
// one; a lost lock is learnt there at the next renewal.
func (t *conn) Track(ctx context.Context, changed func(keys []string)) (transport.Tracker, error) {
	if t.cluster {
		return nil, transport.ErrNoTracking
	}
	d, cancel := t.c.Dedicate()
	lost := d.SetOnInvalidations(func(ms []rueidis.RedisMessage) {
		if ms == nil {
			changed(nil)
			return
		}
		keys := make([]string, 0, len(ms))
		for _, m := range ms {
			if k, err := m.ToString(); err == nil {
				keys = append(keys, k)
			}
		}
		changed(keys)
	})
	if err := d.Do(ctx, d.B().ClientTracking().On().Build()).Error(); err != nil {
		d.SetOnInvalidations(nil)
		cancel()
		return nil, err
	}
	tr := &tracker{d: d, cancel: cancel, done: make(chan struct{})}
	go func() {
		for range lost { // an error, then closed: the hooks end
		}
		close(tr.done)
	}()
	return tr, nil
}

type tracker struct {
	d      rueidis.DedicatedClient
	cancel func()
	done   chan struct{}
	once   sync.Once
}

func (t *tracker) Read(ctx context.Context, key string) (string, bool, error) {
	v, err := t.d.Do(ctx, t.d.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false, nil
	}
	return v, err == nil, err
}

func (t *tracker) Done() <-chan struct{} { return t.done }

func (t *tracker) Close() {
	t.once.Do(func() {
		t.d.SetOnInvalidations(nil) // ends the hooks: done closes
		t.cancel()                  // CLIENT TRACKING OFF, back to the pool
	})
	<-t.done
}
