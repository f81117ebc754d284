package chaos_test

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/chaos"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/redisfence"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestDelayedRequestRedis is TestDelayedRequest with the resource kept in
// a Redis of its own by redisfence, reached by each holder through its
// own proxy. The fence check runs inside Redis, in Lua, so the resource's
// journal comes from Redis too: every call runs in a MULTI with a script
// that logs where it landed and the resource's fence after it (landing).
// Unfenced, the store is plain GET, SET and DEL, logged the same way.
func TestDelayedRequestRedis(t *testing.T) {
	runScenario(t, scenario{name: "delayed-request", adapter: "redis", shortRuns: 3, control: lateRequest, setup: func(t *testing.T) *world {
		s := newStandalone(t)
		res := redistest.New(t)
		direct := res.Client(t)
		var proxied []*redis.Client
		var proxies []*redistest.Proxy
		for range holderCount {
			p := redistest.NewProxy(t, res.Addr())
			rdb := redis.NewClient(redisOptions(p.Addr()))
			t.Cleanup(func() { rdb.Close() })
			proxies = append(proxies, p)
			proxied = append(proxied, rdb)
		}
		store := func(r *run, rdb *redis.Client) fence.Store {
			prefix := r.name + ":" // each run its own keys
			l := &landing{Client: rdb, log: prefix + "landed"}
			if !r.fenced {
				return &plainRedis{l: l, prefix: prefix}
			}
			return redisfence.New(l, &redisfence.Options{Prefix: prefix})
		}
		w := s.world(func(r *run) (*chaos.Journal, func(int) fence.Store) {
			// The journal is used only to Load the final state.
			j := &chaos.Journal{Store: store(r, direct)}
			return j, func(i int) fence.Store { return store(r, proxied[i]) }
		}, fault{
			shortOnly: true,
			hold:      func(r *rand.Rand) time.Duration { return between(r, 1, 1.5) },
			inject:    func(t *testing.T, v int) { proxies[v].SetLatency(6 * ttl) },
			heal:      func(t *testing.T, v int) { proxies[v].SetLatency(0) },
		})
		w.landed = func(r *run, ops []chaos.Op) ([]chaos.Op, error) {
			l := &landing{Client: direct, log: r.name + ":landed"}
			ls, err := l.read(context.Background())
			return landedOps(ops, ls, r.fenced), err
		}
		return w
	}})
}

//go:embed testdata/landing.lua
var landingLua string

var landingScript = redis.NewScript(landingLua)

// landing is a resource Redis client that logs where each call carrying
// an operation ID (chaos.WithOp) landed: the call runs in a MULTI with
// landing.lua, which appends the ID and the resource's fence after the
// call to the log. It is the Scripter given to redisfence, whose scripts
// are the calls; plainRedis logs through it too.
type landing struct {
	*redis.Client
	log string
}

// Eval runs a script, logged.
func (l *landing) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return l.logged(ctx, keys, func(p caller) *redis.Cmd { return p.Eval(ctx, script, keys, args...) })
}

// EvalSha runs a loaded script, logged. A NOSCRIPT reply means the
// script did nothing: the log's entry is voided, and redis.Script runs
// it again with Eval.
func (l *landing) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	cmd := l.logged(ctx, keys, func(p caller) *redis.Cmd { return p.EvalSha(ctx, sha1, keys, args...) })
	if _, id, ok := chaos.OpFrom(ctx); ok && redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		if err := l.Client.RPush(ctx, l.log, "void "+strconv.FormatInt(id, 10)).Err(); err != nil {
			cmd.SetErr(fmt.Errorf("%w (and voiding its landing failed: %v)", cmd.Err(), err))
		}
	}
	return cmd
}

// logged runs the command that do queues in a MULTI with the landing
// script; keys[1], if any, is the resource's fence hash.
func (l *landing) logged(ctx context.Context, keys []string, do func(caller) *redis.Cmd) *redis.Cmd {
	_, id, ok := chaos.OpFrom(ctx)
	if !ok {
		return do(l.Client)
	}
	fenceKey := l.log + ":nofence"
	if len(keys) > 1 {
		fenceKey = keys[1]
	}
	var cmd *redis.Cmd
	l.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		cmd = do(p)
		landingScript.Eval(ctx, p, []string{l.log, fenceKey}, id)
		return nil
	}) // cmd has its own reply or error
	return cmd
}

// caller is what a logged call is queued on: a MULTI, or the client.
type caller interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
	Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd
	EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd
}

// landed is one entry of the log.
type landed struct {
	id    int64
	fence fence.Fence // the resource's fence after the call
}

// read returns the log, voided entries left out.
func (l *landing) read(ctx context.Context) ([]landed, error) {
	lines, err := l.Client.LRange(ctx, l.log, 0, -1).Result()
	if err != nil {
		return nil, err
	}
	var out []landed
	for _, line := range lines {
		if v, ok := strings.CutPrefix(line, "void "); ok {
			id, _ := strconv.ParseInt(v, 10, 64)
			for i, e := range slices.Backward(out) {
				if e.id == id {
					out = slices.Delete(out, i, i+1)
					break
				}
			}
			continue
		}
		f := strings.Split(line, " ")
		if len(f) != 4 {
			return nil, fmt.Errorf("landing log %s: malformed entry %q", l.log, line)
		}
		var e landed
		var err error
		if e.id, err = strconv.ParseInt(f[0], 10, 64); err != nil {
			return nil, fmt.Errorf("landing log %s: entry %q: %v", l.log, line, err)
		}
		if f[2] != "" {
			e.fence.Lock, e.fence.Lease = f[1], f[3]
			if e.fence.Token, err = strconv.ParseInt(f[2], 10, 64); err != nil {
				return nil, fmt.Errorf("landing log %s: entry %q: %v", l.log, line, err)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// landedOps makes the resource's journal out of its landing log: each
// call as its holder sent it, at its position in the log. Fenced, the
// resource accepted a call iff its fence is the resource's fence right
// after it (an accepted call records its fence; a rejected one leaves a
// fence that does not admit it, so not its own); unfenced, it accepted
// every call. A read whose value the holder did not learn is unknown.
func landedOps(ops []chaos.Op, log []landed, fenced bool) []chaos.Op {
	byID := map[int64]chaos.Op{}
	for _, op := range ops {
		byID[op.ID] = op
	}
	var out []chaos.Op
	for i, e := range log {
		op, ok := byID[e.id]
		if !ok {
			// A call no holder recorded: stale-reported says so.
			op = chaos.Op{ID: e.id, Input: chaos.Input{Op: chaos.OpPut}}
		}
		accepted := !fenced || e.fence == op.Input.Fence
		switch {
		case !accepted:
			op.Output = chaos.Output{Result: chaos.ResultStale}
		case op.Input.Op != chaos.OpGet:
			op.Output = chaos.Output{Result: chaos.ResultOK}
		case op.Output.Result != chaos.ResultOK:
			op.Output = chaos.Output{Result: chaos.ResultUnknown}
		}
		op.Err = ""
		op.Call, op.Return = int64(2*i), int64(2*i+1)
		out = append(out, op)
	}
	return out
}

// plainRedis is the unfenced control for Redis: GET, SET and DEL that
// ignore fences, each in a MULTI with its landing.
type plainRedis struct {
	l      *landing
	prefix string
}

func (p *plainRedis) Put(ctx context.Context, resource string, f fence.Fence, value []byte) error {
	return p.l.logged(ctx, nil, func(tx caller) *redis.Cmd {
		return tx.Do(ctx, "SET", p.prefix+resource, value)
	}).Err()
}

func (p *plainRedis) Get(ctx context.Context, resource string, f fence.Fence) ([]byte, error) {
	v, err := p.l.logged(ctx, nil, func(tx caller) *redis.Cmd {
		return tx.Do(ctx, "GET", p.prefix+resource)
	}).Text()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []byte(v), nil
}

func (p *plainRedis) Delete(ctx context.Context, resource string, f fence.Fence) error {
	return p.l.logged(ctx, nil, func(tx caller) *redis.Cmd {
		return tx.Do(ctx, "DEL", p.prefix+resource)
	}).Err()
}

func (p *plainRedis) Load(ctx context.Context, resource string) ([]byte, fence.Fence, error) {
	v, err := p.l.Client.Get(ctx, p.prefix+resource).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fence.Fence{}, nil
	}
	return v, fence.Fence{}, err
}
