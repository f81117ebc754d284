package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/fencelock/fencelock/internal/script"
	"github.com/redis/go-redis/v9"
)

// The server's own limit: how many acquire+release pairs of a row's
// scripts the server runs per second when nothing else limits it, as
// redis-benchmark -P measures a command's: EVALSHA requests written in
// pipelines, on a few connections at once, from a client that does
// nothing but encode them and count the replies (no client library, one
// write and a few reads per pipeline, next to no allocation). Each
// pipeline holds depth pairs, each a new lock name acquired then
// released, so both scripts take their success paths, as in the pair
// scenarios. The server then spends its core on the scripts and on
// parsing and answering requests, with a read and a write per pipeline
// rather than per request: the pair rows' pairs/s over it says how much
// of the server's capacity a lock library leaves unused, its server CPU
// per pair the least the scripts cost with the requests around them.

// limitConns connections each keep limitDepth pairs in flight.
const (
	limitConns = 4
	limitDepth = 16
)

// serverLimit is a pair of scripts, and how a pair of their requests is
// encoded for a new lock key.
type serverLimit struct {
	acquire, release *redis.Script
	// encode appends the acquisition and the release of key by owner.
	encode func(b []byte, acqSHA, relSHA, key, owner string) []byte
}

var (
	// limitFencelock: fencelock's scripts, with the arguments a Client
	// from New(rdb, nil) sends (internal/node's acquireArgs and
	// releaseArgs): TTL 10s, the counter kept 24h after, no proposal, no
	// LockDelay; the release publishes on the lock's channel.
	limitFencelock = &serverLimit{
		acquire: redis.NewScript(script.Acquire.Src),
		release: redis.NewScript(script.Release.Src),
		encode: func(b []byte, acq, rel, key, owner string) []byte {
			lock, token, delay, channel := libKeys(key)
			b = appendCommand(b, "EVALSHA", acq, "3", lock, token, delay, owner, libTTL, libCounter, "0", "0")
			return appendCommand(b, "EVALSHA", rel, "1", lock, owner, channel, "PUBLISH")
		},
	}
	// limitFloorToken: floor+token's scripts, with its arguments.
	limitFloorToken = &serverLimit{
		acquire: floorAcquireToken,
		release: floorRelease,
		encode: func(b []byte, acq, rel, key, owner string) []byte {
			b = appendCommand(b, "EVALSHA", acq, "2", key, key+":token", owner, libTTL)
			return appendCommand(b, "EVALSHA", rel, "1", key, owner)
		},
	}
)

// limitLocker marks a limit row's locker: the pair scenario runs
// runLimit for it instead of runPairs.
type limitLocker struct{}

func (limitLocker) acquire(context.Context, string) (held, error) {
	return nil, errors.New("a server-limit row is run by runLimit, not acquired")
}

// appendCommand appends args as a RESP array of bulk strings.
func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// runLimit measures l's pairs per second on the server at addr for d,
// with both sides' CPU over the run on rdb's server. A reply that is not
// the success path's (a token > 0, then 1) counts as an error.
func runLimit(ctx context.Context, l *serverLimit, addr string, rdb *redis.Client, prefix string, d time.Duration) *pairResult {
	total := &pairResult{}
	fail := func(err error) *pairResult {
		total.errs, total.firstErr = 1, err
		return total
	}
	acq, err := l.acquire.Load(ctx, rdb).Result()
	if err != nil {
		return fail(err)
	}
	rel, err := l.release.Load(ctx, rdb).Result()
	if err != nil {
		return fail(err)
	}
	conns := make([]net.Conn, limitConns)
	for i := range conns {
		var dl net.Dialer
		c, err := dl.DialContext(ctx, "tcp", addr)
		if err != nil {
			return fail(err)
		}
		defer c.Close()
		conns[i] = c
	}
	results := make([]pairResult, len(conns))
	before, err := measure(ctx, []*redis.Client{rdb})
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			r := &results[i]
			// Bounded in time whatever the server does.
			c.SetDeadline(end.Add(opTimeout))
			owner := fmt.Sprintf("limit-owner-%010d", i) // 22 bytes, as randomValue's
			rd := bufio.NewReaderSize(c, 64<<10)
			var b []byte
			for n := 0; time.Now().Before(end) && ctx.Err() == nil; {
				b = b[:0]
				for range limitDepth {
					b = l.encode(b, acq, rel, "floor:{"+prefix+":"+strconv.Itoa(i)+":"+strconv.Itoa(n)+"}", owner)
					n++
				}
				if _, err := c.Write(b); err != nil {
					r.errs, r.firstErr = r.errs+1, err
					return
				}
				for range limitDepth {
					tok, err1 := readInt(rd)
					ok, err2 := readInt(rd)
					if err := errors.Join(err1, err2); err != nil || tok <= 0 || ok != 1 {
						if err == nil {
							err = fmt.Errorf("replies %d, %d: want a token > 0, then 1", tok, ok)
						}
						r.errs++
						if r.firstErr == nil {
							r.firstErr = err
						}
						if err1 != nil || err2 != nil {
							return // the connection's replies are out of step
						}
						continue
					}
					r.pairs++
				}
			}
		})
	}
	wg.Wait()
	total.elapsed = time.Since(start)
	if after, err2 := measure(ctx, []*redis.Client{rdb}); err == nil && err2 == nil {
		total.use = after.sub(before)
	}
	for i := range results {
		total.pairs += results[i].pairs
		total.errs += results[i].errs
		if total.firstErr == nil {
			total.firstErr = results[i].firstErr
		}
	}
	return total
}

// readInt reads one RESP reply that must be an integer.
func readInt(rd *bufio.Reader) (int64, error) {
	line, err := rd.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 3 || line[0] != ':' {
		return 0, fmt.Errorf("reply %q: want an integer", line)
	}
	return strconv.ParseInt(string(line[1:len(line)-2]), 10, 64)
}
