package main

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// counter is a go-redis hook that counts round trips (one per processed
// command, one per pipeline) and the commands they carry.
type counter struct {
	rts, cmds atomic.Int64
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.rts.Add(1)
		c.cmds.Add(1)
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.rts.Add(1)
		c.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func (c *counter) snapshot() (rts, cmds int64) { return c.rts.Load(), c.cmds.Load() }

// serverCalls returns the server's total command count from INFO
// commandstats, commands run inside Lua scripts included, less the INFO
// calls themselves (each snapshot adds one, seen by the next).
func serverCalls(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var total, infos int64
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for f := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				total += n
				if name == "cmdstat_info" {
					infos = n
				}
			}
		}
	}
	return total - infos, nil
}

// serverCPU returns the server process's CPU time so far (INFO cpu:
// used_cpu_sys + used_cpu_user).
func serverCPU(ctx context.Context, rdb *redis.Client) (time.Duration, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for line := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second)), nil
}

// countingClients returns a new client per address, each with its own
// counter, for the round-trip scenario (the hook stays out of the timed
// scenarios).
func countingClients(addrs []string) ([]*redis.Client, []*counter) {
	rdbs := make([]*redis.Client, len(addrs))
	cs := make([]*counter, len(addrs))
	for i, a := range addrs {
		rdbs[i] = newClient(a)
		cs[i] = &counter{}
		rdbs[i].AddHook(cs[i])
		countersByClient.Store(rdbs[i], cs[i])
	}
	return rdbs, cs
}

func newClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: addr}) // go-redis defaults for every contestant, deadlines honoured (fencelock requires it)
}
