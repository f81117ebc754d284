package httpfence_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/httpfence"
)

// sendKey is the context key under which the tests' clients put the fence
// their Transport sends.
type sendKey struct{}

func sendFence(r *http.Request) (fence.Fence, bool) {
	f, ok := r.Context().Value(sendKey{}).(fence.Fence)
	return f, ok
}

// TestMiddleware_concurrent sends requests with mixed tokens and leases
// over loopback. The handler's effect stands for a resource that cannot
// compare tokens: it only remembers the last fence it acted for, in a
// variable nothing but the middleware guards. The handlers must see the
// fences in the order the rule allows, and the race detector must see no
// unsynchronised access.
func TestMiddleware_concurrent(t *testing.T) {
	var last fence.Fence
	var backwards []string
	mw := &httpfence.Middleware{Store: &fence.Memory{}, Resource: byPath}
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, _ := httpfence.FromContext(r.Context())
		if f.Token < last.Token || (f.Token == last.Token && f.Lease != last.Lease) {
			backwards = append(backwards, fmt.Sprintf("%v after %v", f, last))
		}
		last = f
	})))
	defer srv.Close()
	client := &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport, Fence: sendFence}}

	const senders, perSender = 8, 30
	var clock atomic.Int64
	var ok, stale atomic.Int64
	errs := make([]error, senders)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(s), 2))
			for range perSender {
				f := fence.Fence{Lock: "orders", Token: clock.Add(1)/4 + 1 + r.Int64N(3), Lease: []string{"x", "y"}[r.IntN(2)]}
				ctx := context.WithValue(t.Context(), sendKey{}, f)
				req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/orders/42", nil)
				resp, err := client.Do(req)
				if err != nil {
					errs[s] = err
					return
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					ok.Add(1)
				case http.StatusConflict:
					stale.Add(1)
				default:
					errs[s] = fmt.Errorf("POST with %v: status %d", f, resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for _, b := range backwards {
		t.Errorf("handler ran for %s", b)
	}
	if ok.Load() == 0 || stale.Load() == 0 {
		t.Errorf("%d admitted, %d stale; want some of each, or the load tests nothing", ok.Load(), stale.Load())
	}
}

// TestMiddleware_perResource shows that a request held in its handler
// blocks only its own resource, and that a request waiting for a resource
// gives up when its context ends.
func TestMiddleware_perResource(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	mw := &httpfence.Middleware{Store: &fence.Memory{}, Resource: byPath}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f, _ := httpfence.FromContext(r.Context()); r.URL.Path == "/a" && f.Token == 1 {
			close(entered)
			<-release
		}
	}))
	request := func(ctx context.Context, path string, token int64) *httptest.ResponseRecorder {
		r := httptest.NewRequestWithContext(ctx, "POST", path, nil)
		r.Header.Set(httpfence.Header, fence.Fence{Lock: "l", Token: token, Lease: "x"}.String())
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	held := make(chan int)
	go func() { held <- request(t.Context(), "/a", 1).Code }()
	<-entered

	if w := request(t.Context(), "/b", 1); w.Code != http.StatusOK {
		t.Errorf("POST /b while /a is held: status %d, want 200", w.Code)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if w := request(ctx, "/a", 2); w.Code != http.StatusServiceUnavailable {
		t.Errorf("POST /a with a canceled context while /a is held: status %d, want 503", w.Code)
	}
	close(release)
	if code := <-held; code != http.StatusOK {
		t.Errorf("held POST /a: status %d, want 200", code)
	}
	if w := request(t.Context(), "/a", 2); w.Code != http.StatusOK {
		t.Errorf("POST /a after release: status %d, want 200", w.Code)
	}
}

// TestMiddleware_serialisesHandlers shows, without relying on the race
// detector, that no request for a resource is checked or handled while a
// handler for it runs. While the handler of an older fence runs, it sends
// a request with a newer fence whose context has already ended, so that
// the request cannot wait for the resource: it must be turned away (503)
// without being checked, else its handler would act before the older
// one's ends, the stale holder's effect landing after the newer one's.
// The Store ignores the ended context, so that only the middleware's
// serialisation can turn the request away.
func TestMiddleware_serialisesHandlers(t *testing.T) {
	var events []string
	store := &fence.Memory{}
	mw := &httpfence.Middleware{Store: ignoreCancel{store}, Resource: byPath}
	var h http.Handler
	var nested *httptest.ResponseRecorder
	h = mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, _ := httpfence.FromContext(r.Context())
		events = append(events, fmt.Sprintf("start %d", f.Token))
		if f.Token == 1 {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			nested = httptest.NewRecorder()
			h.ServeHTTP(nested, fencedRequest(ctx, "/a", 2))
		}
		events = append(events, fmt.Sprintf("end %d", f.Token))
	}))

	first := httptest.NewRecorder()
	h.ServeHTTP(first, fencedRequest(t.Context(), "/a", 1))
	if first.Code != http.StatusOK {
		t.Fatalf("POST /a with token 1: status %d, want 200", first.Code)
	}
	if nested.Code != http.StatusServiceUnavailable {
		t.Errorf("POST /a with token 2 during token 1's handler, unable to wait: status %d, want 503", nested.Code)
	}
	if got, want := strings.Join(events, ", "), "start 1, end 1"; got != want {
		t.Errorf("handler events %q, want %q: a handler ran inside another's for the same resource", got, want)
	}
	if _, cur, _ := store.Load(t.Context(), "/a"); cur.Token != 1 {
		t.Errorf("fence after the turned-away request: token %d, want 1: it was checked and recorded", cur.Token)
	}
}

func fencedRequest(ctx context.Context, path string, token int64) *http.Request {
	r := httptest.NewRequestWithContext(ctx, "POST", path, nil)
	r.Header.Set(httpfence.Header, fence.Fence{Lock: "l", Token: token, Lease: "x"}.String())
	return r
}

// ignoreCancel is a Store that carries on when the caller's context has
// ended.
type ignoreCancel struct{ *fence.Memory }

func (s ignoreCancel) Get(ctx context.Context, resource string, f fence.Fence) ([]byte, error) {
	return s.Memory.Get(context.WithoutCancel(ctx), resource, f)
}
