package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// connect makes a client for t and checks, within --timeout, that Redis
// answers: through a Sentinel group, that the Sentinels name a master
// that answers. An unreachable server is reported at once, not after
// go-redis's retries, and not as a lock that could not be acquired.
func (cn *conn) connect(ctx context.Context, t *redisTarget) (redis.UniversalClient, error) {
	rdb := t.client()
	refused, stopRefused := context.WithCancelCause(ctx)
	defer stopRefused(nil)
	w := &dialWatch{refused: stopRefused, single: t.node != nil}
	rdb.AddHook(w)
	pctx, cancel := context.WithTimeoutCause(refused, cn.timeout, errNoAnswer)
	defer cancel()
	err := rdb.Ping(pctx).Err()
	lastDial := w.done()
	if err == nil {
		return rdb, nil
	}
	rdb.Close()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("interrupted (%v) while connecting to %s", context.Cause(ctx), redactedURL(cn.url))
	}
	if rerr := (redis.Error)(nil); errors.As(err, &rerr) {
		// Redis was reached, and said no.
		return nil, t.refusal(redactedURL(cn.url), rerr)
	}
	hint := tlsHint(err)
	if hint == "" {
		hint = t.resetAfterHandshake(err)
	}
	if hint != "" {
		return nil, fmt.Errorf("cannot reach Redis at %s: %v (%s)", redactedURL(cn.url), err, hint)
	}
	if context.Cause(pctx) == errNoAnswer {
		hint := ""
		if t.seen != nil {
			hint = "; a server that does not speak TLS at this port does not answer a TLS client either"
		}
		if lastDial != nil {
			hint = "; the last dial failed: " + lastDial.Error() + hint
		}
		return nil, fmt.Errorf("cannot reach Redis at %s: no answer within --timeout %v (%v)%s", redactedURL(cn.url), cn.timeout, err, hint)
	}
	if cause := context.Cause(refused); cause != nil {
		return nil, fmt.Errorf("cannot reach Redis at %s: %w", redactedURL(cn.url), cause)
	}
	return nil, fmt.Errorf("cannot reach Redis at %s: %v", redactedURL(cn.url), err)
}

var errNoAnswer = errors.New("no answer within --timeout")

// refusal words an error reply to connect's first request, from the
// server shown as shown: a password wanted or refused says where the
// password comes from, in the URL's form, and never shows it.
func (t *redisTarget) refusal(shown string, rerr redis.Error) error {
	scheme, _, _ := strings.Cut(shown, "://")
	form := scheme + "://USER:PASSWORD@HOST:PORT"
	if scheme == "unix" {
		form = "unix://USER:PASSWORD@/PATH"
	}
	msg := rerr.Error()
	switch {
	case strings.HasPrefix(msg, "NOAUTH") && t.failover != nil:
		return fmt.Errorf("no password for the master at %s: %w (give it in REDIS_PASSWORD, and the ACL user in REDIS_USERNAME: the URL's are the Sentinels')", shown, rerr)
	case strings.HasPrefix(msg, "WRONGPASS") && t.failover != nil:
		return fmt.Errorf("wrong user or password for the master at %s: %w (give them in REDIS_USERNAME and REDIS_PASSWORD: the URL's are the Sentinels')", shown, rerr)
	case strings.HasPrefix(msg, "NOAUTH"):
		return fmt.Errorf("no password for Redis at %s: %w (give it in REDIS_PASSWORD, and the ACL user in REDIS_USERNAME, or in the URL: %s)", shown, rerr, form)
	case strings.HasPrefix(msg, "WRONGPASS"):
		return fmt.Errorf("wrong user or password for Redis at %s: %w (give them in REDIS_USERNAME and REDIS_PASSWORD, or in the URL: %s)", shown, rerr, form)
	case t.cluster != nil && strings.Contains(msg, "cluster support disabled"):
		return fmt.Errorf("error reply from Redis at %s: %w (it is no Cluster node: for one node write redis://)", shown, rerr)
	}
	return fmt.Errorf("error reply from Redis at %s: %w", shown, rerr)
}

// dialWatch follows the dials of connect's first request. go-redis
// retries a refused dial (for 1.7s in all), and a shorter --timeout then
// hid the refusal behind "no answer": a single node that refuses is
// reported at once (refused is cancelled with the dial's error); through
// Sentinels or a Cluster another address may answer, so the last failed
// dial is only kept for the message. After the first request the hook
// does nothing: the lock client's own retries are its business.
type dialWatch struct {
	refused context.CancelCauseFunc
	single  bool

	mu    sync.Mutex
	ended bool
	last  error
}

// done ends the watch and returns the last failed dial, if any.
func (w *dialWatch) done() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
	return w.last
}

func (w *dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err == nil {
			return c, nil
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.ended {
			return c, err
		}
		w.last = err
		if w.single && (errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)) {
			w.refused(err)
		}
		return c, err
	}
}

func (w *dialWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (w *dialWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// dial checks cn's flags and connects, for the commands that do nothing
// in between. A failure is reported, and comes as a nil client with the
// exit status: 2 for a usage error, 125 if Redis does not answer.
func (c *cli) dial(ctx context.Context, cmd *command, cn *conn) (redis.UniversalClient, int) {
	target, err := cn.check(cmd)
	if err != nil {
		return nil, cmd.exit(err)
	}
	rdb, err := cn.connect(ctx, target)
	if err != nil {
		return nil, c.fail(cmd.name, exitInternal, err)
	}
	return rdb, exitOK
}

// dialName parses args as exactly one lock NAME, then dials; with -h, or
// on failure, the client is nil.
func (c *cli) dialName(ctx context.Context, cmd *command, cn *conn, args []string) (string, redis.UniversalClient, int) {
	pos, _, dashes, err := cmd.parse(args)
	if err == nil {
		err = oneName(pos, dashes)
	}
	if err != nil {
		return "", nil, cmd.exit(err)
	}
	rdb, code := c.dial(ctx, cmd, cn)
	if rdb == nil {
		return "", nil, code
	}
	return pos[0], rdb, exitOK
}
