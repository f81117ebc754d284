//go:build quorum

package main

import (
	"github.com/fencelock/fencelock"
	"github.com/redis/go-redis/v9"
)

func init() {
	quorumRows = append(quorumRows, contestant{
		name:     "fencelock/quorum-3",
		settings: "NewQuorum over 3 independent servers, defaults",
		nodes:    3,
		new: func(r []*redis.Client) locker {
			return &fenceLocker{c: fencelock.NewQuorum([]redis.UniversalClient{r[0], r[1], r[2]}, nil)}
		},
	})
}
