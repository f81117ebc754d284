package main

import (
	"context"
	"runtime"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// usage is what both sides have spent so far: the servers' CPU time
// (INFO cpu: used_cpu_user + used_cpu_sys, summed over the servers a
// contestant uses), this process's CPU time (getrusage: user + system,
// every goroutine, the garbage collector and go-redis included; the
// redis-server children are not counted) and its heap allocations.
type usage struct {
	server, client time.Duration
	mallocs        uint64
}

// measure returns the usage so far. It reads the allocation count
// without stopping the world (runtime/metrics would do too; MemStats is
// simpler and this is called twice per run).
func measure(ctx context.Context, rdbs []*redis.Client) (usage, error) {
	var u usage
	for _, r := range rdbs {
		cpu, err := serverCPU(ctx, r)
		if err != nil {
			return u, err
		}
		u.server += cpu
	}
	u.client = clientCPU()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	u.mallocs = ms.Mallocs
	return u, nil
}

func (u usage) sub(o usage) usage {
	return usage{server: u.server - o.server, client: u.client - o.client, mallocs: u.mallocs - o.mallocs}
}

// per returns the usage per one of n operations.
func (u usage) per(n int) perOp {
	if n <= 0 {
		return perOp{}
	}
	return perOp{
		server: float64(u.server) / float64(time.Microsecond) / float64(n),
		client: float64(u.client) / float64(time.Microsecond) / float64(n),
		allocs: float64(u.mallocs) / float64(n),
	}
}

// perOp is usage per operation: CPU in microseconds, allocations.
type perOp struct {
	server, client, allocs float64
}

// clientCPU returns this process's user and system CPU time so far.
func clientCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
