package s3fence_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/s3fence"
)

// A holder writes the state it computed under its lease; a holder whose
// lease was lost, and which a newer one has overtaken, is refused.
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx) // credentials as for the AWS CLI
	if err != nil {
		log.Fatal(err)
	}
	store := s3fence.New(s3.NewFromConfig(cfg), "my-bucket", &s3fence.Options{Prefix: "fence/"})

	f := fence.Fence{Lock: "reports", Token: 1764431234567890, Lease: "k3J9x"} // lease.Fence()
	err = store.Put(ctx, "reports/daily", f, []byte("computed under the lease"))
	var stale *fence.StaleError
	switch {
	case errors.As(err, &stale):
		fmt.Println("a newer lease has written:", stale.Current.Token)
	case err != nil:
		log.Fatal(err)
	}
}

// Before relying on a store, prove that it enforces conditional writes.
func ExampleProbe() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	findings, err := s3fence.Probe(ctx, s3.NewFromConfig(cfg), "my-bucket", "locks/", nil)
	if err != nil {
		log.Fatal(err) // unreachable, no such bucket, access denied
	}
	for _, f := range findings {
		if f.Severity == s3fence.SevCritical {
			log.Fatalf("%s: %s; %s", f.Check, f.Message, f.Fix)
		}
	}
}
