package redistest_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestServer_restart(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	ctx := t.Context()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}

	s.Restart(t, true)
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET after Restart(keepData) = %q, %v; want %q, nil", got, err, "v")
	}

	s.Restart(t, false)
	if got, err := rdb.Get(ctx, "k").Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Restart(!keepData) = %q, %v; want redis.Nil", got, err)
	}
}

func TestServer_pause(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	s.Pause(t)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	err := rdb.Ping(ctx).Err()
	cancel()
	if err == nil {
		t.Fatalf("PING to a paused server succeeded, want a timeout")
	}
	s.Resume(t)
	if err := rdb.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
}

func TestServer_replica(t *testing.T) {
	t.Parallel()
	m := redistest.New(t)
	r := redistest.Start(t, &redistest.Options{ReplicaOf: m.Addr()})
	ctx := t.Context()
	redistest.WaitReplicasInSync(t, m, 1)
	if err := m.Client(t).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	n, err := m.Client(t).Wait(ctx, 1, 5*time.Second).Result()
	if err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v; want 1, nil", n, err)
	}
	if got, err := r.Client(t).Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET on replica = %q, %v; want %q", got, err, "v")
	}
}

func TestProxy(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	p := redistest.NewProxy(t, s.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	ctx := t.Context()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING through proxy: %v", err)
	}

	p.Partition()
	done := make(chan error, 1)
	go func() { done <- rdb.Set(ctx, "held", "1", 0).Err() }()
	select {
	case err := <-done:
		t.Fatalf("SET during partition returned %v, want it held", err)
	case <-time.After(100 * time.Millisecond):
	}
	p.Heal()
	if err := <-done; err != nil {
		t.Fatalf("SET held by partition: %v after Heal, want nil", err)
	}

	// A connection with a command in flight is cut at once by Reset. A
	// raw connection, so that nothing (a pool, a retry) can replace it.
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := conn.Read(buf); err != nil || string(buf[:n]) != "+PONG\r\n" {
		t.Fatalf("raw PING through proxy = %q, %v; want +PONG", buf[:n], err)
	}
	if _, err := conn.Write([]byte("BLPOP nothing 10\r\n")); err != nil {
		t.Fatal(err)
	}
	p.Reset()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := conn.Read(buf); err == nil {
		t.Fatalf("read after Reset = %q, want the connection cut", buf[:n])
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("read after Reset timed out, want the connection cut at once")
	}
	// A new client: rdb's pooled connection was cut too, and whether its
	// pool notices before reusing it is go-redis's affair, not the proxy's.
	fresh := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	t.Cleanup(func() { fresh.Close() })
	if err := fresh.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING on a new connection after Reset: %v", err)
	}
}
