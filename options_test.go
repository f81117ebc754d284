package fencelock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
)

// invalidOptions are Options that New refuses, one rule each.
var invalidOptions = []fencelock.Options{
	{TTL: -time.Second},
	{TTL: time.Millisecond},
	{TTL: 25 * time.Hour},
	{TTL: time.Second, RenewInterval: time.Second},
	{RetryInterval: -1},
	{MinReplicas: -1},
	{TTL: time.Second, ReplicaTimeout: 2 * time.Second},
	{TTL: time.Second, ReplicaTimeout: time.Microsecond},
	{TTL: time.Hour, TokenRetention: time.Minute},
}

// Validate applies New's rules without a Redis client: every Options that
// New refuses it refuses with the same error, wrapping ErrInvalid, and the
// defaults (nil, the zero Options) and the documented extremes pass.
func TestOptions_Validate(t *testing.T) {
	t.Parallel()
	for _, opts := range invalidOptions {
		err := opts.Validate()
		if !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("(%+v).Validate() = %v, want ErrInvalid", opts, err)
			continue
		}
		// A nil *redis.Client adds its own error: New's error starts with
		// the Options'.
		_, newErr := fencelock.New(nil, &opts).TryAcquire(t.Context(), "ok")
		if newErr == nil || len(newErr.Error()) < len(err.Error()) || newErr.Error()[:len(err.Error())] != err.Error() {
			t.Errorf("(%+v).Validate() = %q, want New's error %q", opts, err, newErr)
		}
	}
	for _, opts := range []*fencelock.Options{
		nil,
		{},
		{TTL: fencelock.MinTTL},
		{TTL: fencelock.MaxTTL},
		{TTL: time.Second, RenewInterval: -1, TokenRetention: -1},
		{TTL: time.Second, TokenRetention: time.Second, MinReplicas: 2, ReplicaTimeout: time.Millisecond},
	} {
		if err := opts.Validate(); err != nil {
			t.Errorf("(%+v).Validate() = %v, want nil", opts, err)
		}
	}
}
