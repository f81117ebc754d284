package chaos_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/fencelock/fencelock/chaos"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/s3fence"
	"github.com/fencelock/fencelock/fence/s3fence/s3test"
)

// TestHolderPauseS3 is TestHolderPause with the resource in an S3 bucket
// (SeaweedFS's gateway), fenced by s3fence.Store: each holder has a Store
// of its own, as separate processes would, so that what one remembers of
// an object is out of date once another has written it. Unfenced, the
// holders read and write the objects with plain GETs and PUTs. The fence
// check is the store's conditional write, so only the holders' history
// is checked (no resource journal: recording the calls in front of the
// store would serialise them).
func TestHolderPauseS3(t *testing.T) {
	runScenario(t, scenario{name: "holder-pause", adapter: "s3", shortRuns: 3, control: staleWrite, setup: func(t *testing.T) *world {
		s := newStandalone(t)
		srv := s3test.New(t)
		c := srv.Client(srv.Endpoint())
		bucket := srv.NewBucket(t)
		return s.world(func(r *run) (*chaos.Journal, func(int) fence.Store) {
			prefix := r.name + "/" // each run its own objects
			store := func() fence.Store {
				if !r.fenced {
					return &plainS3{c: c, bucket: bucket, prefix: prefix}
				}
				return s3fence.New(c, bucket, &s3fence.Options{Prefix: prefix})
			}
			// The journal is used only to Load the final state.
			views := make([]fence.Store, holderCount)
			for i := range views {
				views[i] = store()
			}
			return &chaos.Journal{Store: store()}, func(i int) fence.Store { return views[i] }
		}, holderPause(s))
	}})
}

// plainS3 is the unfenced control for S3: GETs and PUTs of the value
// that ignore fences.
type plainS3 struct {
	c              *s3.Client
	bucket, prefix string
}

func (p *plainS3) key(resource string) *string {
	k := p.prefix + resource
	return &k
}

func (p *plainS3) Put(ctx context.Context, resource string, f fence.Fence, value []byte) error {
	_, err := p.c.PutObject(ctx, &s3.PutObjectInput{Bucket: &p.bucket, Key: p.key(resource), Body: bytes.NewReader(value)})
	return err
}

func (p *plainS3) Get(ctx context.Context, resource string, f fence.Fence) ([]byte, error) {
	out, err := p.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &p.bucket, Key: p.key(resource)})
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchKey" {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if len(b) == 0 {
		b = nil
	}
	return b, err
}

func (p *plainS3) Delete(ctx context.Context, resource string, f fence.Fence) error {
	_, err := p.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &p.bucket, Key: p.key(resource)})
	return err
}

func (p *plainS3) Load(ctx context.Context, resource string) ([]byte, fence.Fence, error) {
	v, err := p.Get(ctx, resource, fence.Fence{})
	return v, fence.Fence{}, err
}
