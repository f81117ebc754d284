package main

import (
	"context"
	"errors"
)

// demo comes in the next commit.
func (c *cli) demo(ctx context.Context, args []string) int {
	return c.fail("demo", exitInternal, errors.New("not implemented yet"))
}
