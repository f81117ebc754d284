package main

import (
	"github.com/fencelock/fencelock"
	"github.com/redis/go-redis/v9"
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
	}}
}
