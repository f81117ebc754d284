package main

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/fencelock/fencelock/internal/script"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// The transport rows send the fencing floor's own scripts (floor+token)
// through clients that pipeline concurrent callers' commands by
// themselves: go-redis's AutoPipeliner, which, as fencelock's batcher,
// sends each batch as one pipeline and waits for its replies before the
// next (one batch in flight by default), and rueidis, which writes every
// caller's command to one connection as it comes and reads the replies
// on another goroutine, so commands are in flight while replies come
// back. They are no lock library's rows: they measure what the transport
// alone gives the same server work, to tell the batching's gains from
// its limits (bench/README, "What the figures say").

// tokenLocker is a lock of two scripts, floor+token's or fencelock's, on
// one transport; it polls every millisecond while the lock is held, as
// the floor does.
type tokenLocker struct {
	t tokenTransport
}

// tokenTransport runs a row's scripts: acquire returns the token (0 or
// less if held), release 1 if it deleted, renew 1 if it extended.
type tokenTransport interface {
	acquire(ctx context.Context, key, value string) (int64, error)
	release(ctx context.Context, key, value string) (int64, error)
	renew(ctx context.Context, key, value string) (int64, error)
}

type tokenHeld struct {
	t          tokenTransport
	key, value string
}

func (l *tokenLocker) acquire(ctx context.Context, name string) (held, error) {
	key, value := "floor:{"+name+"}", randomValue()
	err := poll(ctx, time.Millisecond, func() (bool, error) {
		n, err := l.t.acquire(ctx, key, value)
		return n > 0, err
	})
	if err != nil {
		return nil, err
	}
	return &tokenHeld{t: l.t, key: key, value: value}, nil
}

func (h *tokenHeld) release(ctx context.Context) error {
	n, err := h.t.release(ctx, h.key, h.value)
	if err == nil && n != 1 {
		err = errors.New("floor: lock not held")
	}
	return err
}

func (h *tokenHeld) renew(ctx context.Context) error {
	n, err := h.t.renew(ctx, h.key, h.value)
	if err == nil && n != 1 {
		err = errors.New("floor: lock not held")
	}
	return err
}

// autoPipeline is go-redis's AutoPipeliner, defaults, over the harness's
// client.
type autoPipeline struct{ ap *redis.AutoPipeliner }

func newAutoPipeline(rdb *redis.Client) locker {
	ap, err := rdb.AutoPipeline()
	if err != nil {
		panic(err) // the defaults are valid
	}
	return &tokenLocker{t: autoPipeline{ap}}
}

func (a autoPipeline) acquire(ctx context.Context, key, value string) (int64, error) {
	return floorAcquireToken.Run(ctx, a.ap, []string{key, key + ":token"}, value, ttl.Milliseconds()).Int64()
}

func (a autoPipeline) release(ctx context.Context, key, value string) (int64, error) {
	return floorRelease.Run(ctx, a.ap, []string{key}, value).Int64()
}

func (a autoPipeline) renew(ctx context.Context, key, value string) (int64, error) {
	return floorRenew.Run(ctx, a.ap, []string{key}, value, ttl.Milliseconds()).Int64()
}

// rueidisClients are the rueidis clients by server address, one each for
// the whole run (a locker has no Close).
var rueidisClients sync.Map

// rueidisTransport is rueidis, defaults (auto-pipelining on).
type rueidisTransport struct{ c rueidis.Client }

var (
	rueidisAcquire = rueidis.NewLuaScript(floorAcquireTokenSrc)
	rueidisRelease = rueidis.NewLuaScript(floorReleaseSrc)
	rueidisRenew   = rueidis.NewLuaScript(floorRenewSrc)
)

func newRueidis(rdb *redis.Client) locker {
	return &tokenLocker{t: rueidisTransport{rueidisClient(rdb)}}
}

// rueidisClient returns the run's rueidis client for rdb's server.
func rueidisClient(rdb *redis.Client) rueidis.Client {
	addr := rdb.Options().Addr
	c, ok := rueidisClients.Load(addr)
	if !ok {
		nc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			panic(err) // the harness's server answers its go-redis client
		}
		c, _ = rueidisClients.LoadOrStore(addr, nc)
	}
	return c.(rueidis.Client)
}

func (r rueidisTransport) acquire(ctx context.Context, key, value string) (int64, error) {
	return rueidisAcquire.Exec(ctx, r.c, []string{key, key + ":token"}, []string{value, strconv.FormatInt(ttl.Milliseconds(), 10)}).AsInt64()
}

func (r rueidisTransport) release(ctx context.Context, key, value string) (int64, error) {
	return rueidisRelease.Exec(ctx, r.c, []string{key}, []string{value}).AsInt64()
}

func (r rueidisTransport) renew(ctx context.Context, key, value string) (int64, error) {
	return rueidisRenew.Exec(ctx, r.c, []string{key}, []string{value, strconv.FormatInt(ttl.Milliseconds(), 10)}).AsInt64()
}

// The script rows send fencelock's own acquisition and release scripts
// (internal/script: lua/acquire.lua and lua/release.lua, exactly the text
// the library sends), with a new owner per acquisition as the library
// does, and nothing else of the library: no lease, keeper, batcher or
// wake-up. Beside floor+token they give what the scripts alone cost; on
// rueidis, what they cost on a transport whose writes and reads overlap.

// Arguments as a Client from New(rdb, nil) sends them: TTL 10s, the
// counter kept 24h after the lock would expire, no proposal, no
// LockDelay.
var (
	libTTL     = strconv.FormatInt(ttl.Milliseconds(), 10)
	libCounter = strconv.FormatInt((ttl + 24*time.Hour).Milliseconds(), 10)
)

func libKeys(key string) (lock, token, delay, channel string) {
	return key, key + ":token", key + ":delay", key + ":released"
}

// libGoRedis is the scripts on the harness's go-redis client, one
// request per call.
type libGoRedis struct {
	rdb        *redis.Client
	take, free *redis.Script
}

func newLibGoRedis(rdb *redis.Client) locker {
	return &tokenLocker{t: libGoRedis{rdb: rdb, take: redis.NewScript(script.Acquire.Src), free: redis.NewScript(script.Release.Src)}}
}

func (l libGoRedis) acquire(ctx context.Context, key, value string) (int64, error) {
	lock, token, delay, _ := libKeys(key)
	return l.take.Run(ctx, l.rdb, []string{lock, token, delay}, value, libTTL, libCounter, "0", "0").Int64()
}

func (l libGoRedis) release(ctx context.Context, key, value string) (int64, error) {
	lock, _, _, channel := libKeys(key)
	return l.free.Run(ctx, l.rdb, []string{lock}, value, channel, "PUBLISH").Int64()
}

func (l libGoRedis) renew(ctx context.Context, key, value string) (int64, error) {
	return floorRenew.Run(ctx, l.rdb, []string{key}, value, ttl.Milliseconds()).Int64()
}

// libRueidis is the scripts on rueidis.
type libRueidis struct {
	c          rueidis.Client
	take, free *rueidis.Lua
}

func newLibRueidis(rdb *redis.Client) locker {
	return &tokenLocker{t: libRueidis{c: rueidisClient(rdb), take: rueidis.NewLuaScript(script.Acquire.Src), free: rueidis.NewLuaScript(script.Release.Src)}}
}

func (l libRueidis) acquire(ctx context.Context, key, value string) (int64, error) {
	lock, token, delay, _ := libKeys(key)
	return l.take.Exec(ctx, l.c, []string{lock, token, delay}, []string{value, libTTL, libCounter, "0", "0"}).AsInt64()
}

func (l libRueidis) release(ctx context.Context, key, value string) (int64, error) {
	lock, _, _, channel := libKeys(key)
	return l.free.Exec(ctx, l.c, []string{lock}, []string{value, channel, "PUBLISH"}).AsInt64()
}

func (l libRueidis) renew(ctx context.Context, key, value string) (int64, error) {
	return rueidisTransport{l.c}.renew(ctx, key, value)
}
