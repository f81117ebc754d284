// Package inspect lets the module's tests outside the root package
// (tests/) look at what a Client keeps, as an export_test.go file lets a
// package's own tests: the root package sets its functions, and nothing
// but tests calls them.
package inspect

import (
	"context"

	"github.com/fencelock/fencelock/internal/node"
)

// Backend returns the deployment of a *fencelock.Client: a *node.Node or
// a *quorum.Quorum. The root package sets it.
var Backend func(client any) any

// Queued returns how many calls of client, a *fencelock.Client on a single
// deployment, wait for the next batch to the master that serves the lock
// named name (default Prefix): tests wait for a batch to form.
func Queued(client any, name string) int {
	n := Backend(client).(*node.Node)
	return n.Queued(context.Background(), n.Config().LockKey(name))
}
