package main

import (
	"context"

	"github.com/fencelock/fencelock/transport/rueidisconn"
	"github.com/fencelock/fencelock/transport/valkeyconn"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	valkey "github.com/valkey-io/valkey-go"
)

// The library rows on other transports: fencelock.Client with its default
// Options, as the fencelock row, over transport/rueidisconn and
// transport/valkeyconn, each on a client of its own made with the client
// library's defaults (auto-pipelining: concurrent callers' commands share
// the writes of one connection whose reads overlap them). Outside a
// Cluster the Client's batcher gathers concurrent calls into one DoMulti,
// two in flight at a time (transport.Conn.Pipelines).

// transportLocker is a fencelock Client over a client it closes with the
// row's run.
type transportLocker struct {
	fenceLocker
	closeClient func()
}

func (t *transportLocker) close() { t.closeClient() }

// newFencelockRueidis is fencelock over rueidis on rdb's server; on a
// counting client (the round-trip scenario) its requests are counted
// into rdb's counter.
func newFencelockRueidis(rdb *redis.Client) locker {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{rdb.Options().Addr}})
	if err != nil {
		panic(err) // the harness's server answers its go-redis client
	}
	var cl rueidis.Client = c
	if n := counterOf(rdb); n != nil {
		cl = countingRueidis{Client: c, c: n}
	}
	return &transportLocker{fenceLocker: fenceLocker{c: rueidisconn.New(cl, nil)}, closeClient: c.Close}
}

// newFencelockValkey is the same over valkey-go.
func newFencelockValkey(rdb *redis.Client) locker {
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{rdb.Options().Addr}})
	if err != nil {
		panic(err) // the harness's server answers its go-redis client
	}
	var cl valkey.Client = c
	if n := counterOf(rdb); n != nil {
		cl = countingValkey{Client: c, c: n}
	}
	return &transportLocker{fenceLocker: fenceLocker{c: valkeyconn.New(cl, nil)}, closeClient: c.Close}
}

// countingValkey counts a valkey-go client's requests into a counter, as
// countingRueidis does.
type countingValkey struct {
	valkey.Client
	c *counter
}

func (v countingValkey) Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult {
	v.c.rts.Add(1)
	v.c.cmds.Add(1)
	return v.Client.Do(ctx, cmd)
}

func (v countingValkey) DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult {
	v.c.rts.Add(1)
	v.c.cmds.Add(int64(len(multi)))
	return v.Client.DoMulti(ctx, multi...)
}
