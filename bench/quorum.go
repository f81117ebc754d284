package main

import (
	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/transport/rueidisconn"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// quorumContestants are fencelock's quorum-mode rows, compared with
// redsync's Redlock over the same 3 servers (scenario 6). Every scenario,
// the round-trip table and the quorum table pick them up.
func quorumContestants() []contestant {
	return []contestant{{
		name:     "fencelock/quorum-3",
		settings: "NewQuorum over 3 independent servers, defaults",
		nodes:    3,
		new: func(r []*redis.Client) locker {
			return &fenceLocker{c: fencelock.NewQuorum([]redis.UniversalClient{r[0], r[1], r[2]}, nil)}
		},
	}, {
		name:     "fencelock/quorum-3/rueidis",
		settings: "rueidisconn.NewQuorum over the same 3 servers, defaults, a rueidis client each with rueidis's defaults",
		nodes:    3,
		new:      newQuorumRueidis,
	}}
}

// newQuorumRueidis is quorum mode over rueidis: a client of its own per
// server, whose requests are counted into that server's counter in the
// round-trip scenario.
func newQuorumRueidis(r []*redis.Client) locker {
	clients := make([]rueidis.Client, 3)
	closers := make([]rueidis.Client, 3)
	for i := range clients {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r[i].Options().Addr}})
		if err != nil {
			panic(err) // the harness's server answers its go-redis client
		}
		clients[i], closers[i] = c, c
		if n := counterOf(r[i]); n != nil {
			clients[i] = countingRueidis{Client: c, c: n}
		}
	}
	return &transportLocker{fenceLocker: fenceLocker{c: rueidisconn.NewQuorum(clients, nil)}, closeClient: func() {
		for _, c := range closers {
			c.Close()
		}
	}}
}
