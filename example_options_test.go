package fencelock_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/fencelock/fencelock"
)

func ExampleOptions_Validate() {
	// A configuration read at start-up, with the TTL in the wrong unit.
	opts := &fencelock.Options{TTL: 30 * time.Microsecond}
	err := opts.Validate()
	fmt.Println(errors.Is(err, fencelock.ErrInvalid))
	fmt.Println(err)
	// Output:
	// true
	// fencelock: invalid argument: TTL 30µs outside [10ms, 24h0m0s]
}
