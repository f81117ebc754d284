package s3fence_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	"github.com/fencelock/fencelock/fence/s3fence"
	"github.com/fencelock/fencelock/fence/s3fence/s3test"
)

// newStores returns a newStore for fencetest.Run that gives each subtest
// its own key prefix in bucket.
func newStores(c s3fence.Client, bucket string) func(t *testing.T) fence.Store {
	return func(t *testing.T) fence.Store {
		return s3fence.New(c, bucket, &s3fence.Options{Prefix: t.Name() + "/"})
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	s3test.StopShared()
	os.Exit(code)
}

func TestStore(t *testing.T) {
	srv := s3test.Shared(t)
	fencetest.Run(t, newStores(srv.Client(srv.Endpoint()), srv.NewBucket(t)))
}

// TestStore_ignoredConditions is the negative control of the tests that
// rely on enforced conditions (TestStore_twoStores): on a store that
// ignores If-Match, a Store that remembers the object as it wrote it
// writes again on that ETag, and its stale write is accepted over a
// newer holder's.
func TestStore_ignoredConditions(t *testing.T) {
	srv := s3test.Shared(t)
	c := srv.Client(srv.IgnoreConditions(t))
	bucket := srv.NewBucket(t)
	a, b := s3fence.New(c, bucket, nil), s3fence.New(c, bucket, nil)
	f1 := fence.Fence{Lock: "orders", Token: 1, Lease: "a"}
	f2 := fence.Fence{Lock: "orders", Token: 2, Lease: "b"}
	if err := a.Put(t.Context(), "r", f1, []byte("a1")); err != nil {
		t.Fatalf("a.Put(f1) = %v", err)
	}
	if err := b.Put(t.Context(), "r", f2, []byte("b2")); err != nil {
		t.Fatalf("b.Put(f2) = %v", err)
	}
	if err := a.Put(t.Context(), "r", f1, []byte("stale")); err != nil {
		t.Fatalf("a.Put(f1) after b.Put(f2) through the proxy = %v, want it accepted: the proxy does not drop If-Match", err)
	}
	v, cur, err := b.Load(t.Context(), "r")
	if err != nil || string(v) != "stale" || cur != f1 {
		t.Errorf("Load = %q, %v, %v; want the stale write, %v", v, cur, err, f1)
	}
}

// raw reads the object at key whole, bypassing the Store.
func raw(t *testing.T, c *s3.Client, bucket, key string) string {
	t.Helper()
	out, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		t.Fatalf("GetObject(%s): %v", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", key, err)
	}
	return string(b)
}

// TestStore_objects shows where a resource is kept and in what form: its
// object holds the fence's line and the value, and Delete leaves the
// fence (a tombstone), which keeps the older holder out.
func TestStore_objects(t *testing.T) {
	srv := s3test.Shared(t)
	c := srv.Client(srv.Endpoint())
	bucket := srv.NewBucket(t)
	s := s3fence.New(c, bucket, &s3fence.Options{Prefix: "fence/"})
	f := fence.Fence{Lock: "orders", Token: 10, Lease: "a"}
	if err := s.Put(t.Context(), "orders/42", f, []byte("v10")); err != nil {
		t.Fatalf("Put = %v", err)
	}
	if got, want := s.Key("orders/42"), "fence/orders/42"; got != want {
		t.Errorf("Key(orders/42) = %q, want %q", got, want)
	}
	want := "fencelock-fence/1 " + f.String() + "\nv10"
	if got := raw(t, c, bucket, "fence/orders/42"); got != want {
		t.Errorf("object = %q, want %q", got, want)
	}
	del := fence.Fence{Lock: "orders", Token: 11, Lease: "b"}
	if err := s.Delete(t.Context(), "orders/42", del); err != nil {
		t.Fatalf("Delete = %v", err)
	}
	want = "fencelock-fence/1 " + del.String() + "\n"
	if got := raw(t, c, bucket, "fence/orders/42"); got != want {
		t.Errorf("object after Delete = %q, want the tombstone %q", got, want)
	}
	// Another Store (another process) knows nothing of the first one's
	// writes: the tombstone alone keeps the older holder out.
	other := s3fence.New(c, bucket, &s3fence.Options{Prefix: "fence/"})
	if err := other.Put(t.Context(), "orders/42", f, []byte("late")); !errors.Is(err, fence.ErrStale) {
		t.Errorf("Put with the older fence after Delete = %v, want ErrStale", err)
	}
}

// TestStore_twoStores has two Stores, as two processes would, write one
// resource: each remembers the ETag it wrote last and writes on it
// without reading, which must fail over to a read when the other has
// written since.
func TestStore_twoStores(t *testing.T) {
	srv := s3test.Shared(t)
	c := srv.Client(srv.Endpoint())
	bucket := srv.NewBucket(t)
	a, b := s3fence.New(c, bucket, nil), s3fence.New(c, bucket, nil)
	f1 := fence.Fence{Lock: "orders", Token: 1, Lease: "a"}
	f2 := fence.Fence{Lock: "orders", Token: 2, Lease: "b"}
	if err := a.Put(t.Context(), "r", f1, []byte("a1")); err != nil {
		t.Fatalf("a.Put(f1) = %v", err)
	}
	if err := b.Put(t.Context(), "r", f2, []byte("b2")); err != nil {
		t.Fatalf("b.Put(f2) = %v", err)
	}
	// a remembers the object it wrote, with f1: its write on that ETag
	// fails, and it reads f2.
	err := a.Put(t.Context(), "r", f1, []byte("a1 again"))
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Current != f2 {
		t.Errorf("a.Put(f1) after b.Put(f2) = %v, want a StaleError with Current %v", err, f2)
	}
	v, cur, err := b.Load(t.Context(), "r")
	if err != nil || string(v) != "b2" || cur != f2 {
		t.Errorf("Load = %q, %v, %v; want b2, %v", v, cur, err, f2)
	}
	// b remembers its own write: its next Put succeeds, and a's newer
	// fence then succeeds too, after a failed write and a read.
	if err := b.Put(t.Context(), "r", f2, []byte("b2 again")); err != nil {
		t.Errorf("b.Put(f2) again = %v", err)
	}
	f3 := fence.Fence{Lock: "orders", Token: 3, Lease: "a"}
	if err := a.Put(t.Context(), "r", f3, []byte("a3")); err != nil {
		t.Errorf("a.Put(f3) = %v", err)
	}
	if err := b.Put(t.Context(), "r", f2, []byte("b2 late")); !errors.Is(err, fence.ErrStale) {
		t.Errorf("b.Put(f2) after a.Put(f3) = %v, want ErrStale", err)
	}
}

// counting counts a Client's requests.
type counting struct {
	s3fence.Client
	mu             sync.Mutex
	gets, ranged   int
	puts, putBytes int
}

func (c *counting) GetObject(ctx context.Context, in *s3.GetObjectInput, o ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	c.mu.Lock()
	c.gets++
	if in.Range != nil {
		c.ranged++
	}
	c.mu.Unlock()
	return c.Client.GetObject(ctx, in, o...)
}

func (c *counting) PutObject(ctx context.Context, in *s3.PutObjectInput, o ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	c.mu.Lock()
	c.puts++
	c.putBytes += int(aws.ToInt64(in.ContentLength))
	c.mu.Unlock()
	return c.Client.PutObject(ctx, in, o...)
}

func (c *counting) take() (gets, ranged, puts int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gets, ranged, puts = c.gets, c.ranged, c.puts
	c.gets, c.ranged, c.puts, c.putBytes = 0, 0, 0, 0
	return gets, ranged, puts
}

// TestStore_requests checks the costs that the package documents.
func TestStore_requests(t *testing.T) {
	srv := s3test.Shared(t)
	c := &counting{Client: srv.Client(srv.Endpoint())}
	bucket := srv.NewBucket(t)
	s := s3fence.New(c, bucket, nil)
	ctx := t.Context()
	f1 := fence.Fence{Lock: "orders", Token: 1, Lease: "a"}
	f2 := fence.Fence{Lock: "orders", Token: 2, Lease: "b"}
	big := bytes.Repeat([]byte("x"), 64<<10)
	steps := []struct {
		name               string
		do                 func() error
		gets, ranged, puts int
	}{
		{"first Put", func() error { return s.Put(ctx, "r", f1, big) }, 1, 1, 1},
		{"Put again", func() error { return s.Put(ctx, "r", f1, big) }, 0, 0, 1},
		{"Get, same fence", func() error { _, err := s.Get(ctx, "r", f1); return err }, 1, 0, 0},
		{"Get, newer fence", func() error { _, err := s.Get(ctx, "r", f2); return err }, 1, 0, 1},
		{"Put after Get", func() error { return s.Put(ctx, "r", f2, []byte("v")) }, 0, 0, 1},
		{"Delete", func() error { return s.Delete(ctx, "r", f2) }, 0, 0, 1},
		{"Load", func() error { _, _, err := s.Load(ctx, "r"); return err }, 1, 0, 0},
		{"stale Put", func() error { return s.Put(ctx, "r", f1, nil) }, 1, 1, 0},
	}
	for _, st := range steps {
		err := st.do()
		if st.name == "stale Put" {
			if !errors.Is(err, fence.ErrStale) {
				t.Errorf("%s = %v, want ErrStale", st.name, err)
			}
		} else if err != nil {
			t.Fatalf("%s = %v", st.name, err)
		}
		gets, ranged, puts := c.take()
		if gets != st.gets || ranged != st.ranged || puts != st.puts {
			t.Errorf("%s: %d GETs (%d ranged), %d PUTs; want %d (%d), %d", st.name, gets, ranged, puts, st.gets, st.ranged, st.puts)
		}
	}
	// A fresh Store reads the fence with a ranged GET: 4 KiB, not the
	// 64 KiB value.
	s2 := s3fence.New(c, bucket, nil)
	if err := s2.Put(ctx, "big", f1, big); err != nil {
		t.Fatal(err)
	}
	s3 := s3fence.New(c, bucket, nil)
	c.take()
	if err := s3.Put(ctx, "big", f2, []byte("small")); err != nil {
		t.Fatal(err)
	}
	if gets, ranged, puts := c.take(); gets != 1 || ranged != 1 || puts != 1 {
		t.Errorf("Put by a new Store: %d GETs (%d ranged), %d PUTs; want 1 (1), 1", gets, ranged, puts)
	}
}

// TestStore_wrongFormat: an object the Store did not write is reported,
// and left as it is.
func TestStore_wrongFormat(t *testing.T) {
	srv := s3test.Shared(t)
	c := srv.Client(srv.Endpoint())
	bucket := srv.NewBucket(t)
	for _, body := range []string{"", "{}", strings.Repeat("fencelock-fence/1 ", 300)} {
		key := "foreign"
		if _, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
		s := s3fence.New(c, bucket, nil)
		f := fence.Fence{Lock: "orders", Token: 1, Lease: "a"}
		if err := s.Put(t.Context(), key, f, []byte("v")); !errors.Is(err, s3fence.ErrWrongFormat) {
			t.Errorf("Put over %.20q = %v, want ErrWrongFormat", body, err)
		}
		if _, err := s.Get(t.Context(), key, f); !errors.Is(err, s3fence.ErrWrongFormat) {
			t.Errorf("Get of %.20q = %v, want ErrWrongFormat", body, err)
		}
		if err := s.Delete(t.Context(), key, f); !errors.Is(err, s3fence.ErrWrongFormat) {
			t.Errorf("Delete of %.20q = %v, want ErrWrongFormat", body, err)
		}
		if _, _, err := s.Load(t.Context(), key); !errors.Is(err, s3fence.ErrWrongFormat) {
			t.Errorf("Load of %.20q = %v, want ErrWrongFormat", body, err)
		}
		if got := raw(t, c, bucket, key); got != body {
			t.Errorf("object = %.20q after the refused accesses, want %.20q", got, body)
		}
	}
}

func TestNew_invalid(t *testing.T) {
	srv := s3test.Shared(t)
	c := srv.Client(srv.Endpoint())
	f := fence.Fence{Lock: "orders", Token: 1, Lease: "a"}
	for _, s := range []*s3fence.Store{
		s3fence.New(nil, "b", nil),
		s3fence.New(c, "", nil),
		s3fence.New(c, "b", &s3fence.Options{Prefix: strings.Repeat("p", 513)}),
		s3fence.New(c, "b", &s3fence.Options{Prefix: "\xff"}),
	} {
		if err := s.Put(t.Context(), "r", f, nil); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("Put = %v, want ErrInvalid", err)
		}
		if _, err := s.Get(t.Context(), "r", f); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("Get = %v, want ErrInvalid", err)
		}
		if err := s.Delete(t.Context(), "r", f); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("Delete = %v, want ErrInvalid", err)
		}
		if _, _, err := s.Load(t.Context(), "r"); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("Load = %v, want ErrInvalid", err)
		}
	}
}

func TestStore_noBucket(t *testing.T) {
	srv := s3test.Shared(t)
	s := s3fence.New(srv.Client(srv.Endpoint()), "no-such-bucket", nil)
	err := s.Put(t.Context(), "r", fence.Fence{Lock: "orders", Token: 1, Lease: "a"}, nil)
	if err == nil || errors.Is(err, fence.ErrStale) || !strings.Contains(err.Error(), "NoSuchBucket") {
		t.Errorf("Put to a missing bucket = %v, want NoSuchBucket", err)
	}
}

func TestStore_canceled(t *testing.T) {
	srv := s3test.Shared(t)
	s := s3fence.New(srv.Client(srv.Endpoint()), srv.NewBucket(t), nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := s.Put(ctx, "r", fence.Fence{Lock: "orders", Token: 1, Lease: "a"}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a canceled context = %v, want context.Canceled", err)
	}
}

// TestStore_hooks: the Store reports through fence.WithHooks like every
// adapter, stale accesses with the fence that refused them.
func TestStore_hooks(t *testing.T) {
	srv := s3test.Shared(t)
	var mu sync.Mutex
	var got []string
	var current fence.Fence
	h := &fence.Hooks{
		Accepted: func(_ context.Context, i fence.AccessInfo) {
			mu.Lock()
			got = append(got, "accepted "+i.Op)
			mu.Unlock()
		},
		Stale: func(_ context.Context, i fence.AccessInfo) {
			mu.Lock()
			got = append(got, "stale "+i.Op)
			current = i.Current
			mu.Unlock()
		},
	}
	s := fence.WithHooks(s3fence.New(srv.Client(srv.Endpoint()), srv.NewBucket(t), nil), h)
	f1 := fence.Fence{Lock: "orders", Token: 1, Lease: "a"}
	f2 := fence.Fence{Lock: "orders", Token: 2, Lease: "b"}
	s.Put(t.Context(), "r", f2, []byte("v"))
	s.Put(t.Context(), "r", f1, []byte("late"))
	s.Get(t.Context(), "r", f2)
	want := []string{"accepted put", "stale put", "accepted get"}
	if strings.Join(got, ",") != strings.Join(want, ",") || current != f2 {
		t.Errorf("hooks saw %q, current %v; want %q, %v", got, current, want, f2)
	}
}
