package httpfence_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	"github.com/fencelock/fencelock/fence/httpfence"
)

// byPath fences every request except GET, on the resource named by the
// URL path.
func byPath(r *http.Request) (string, bool) {
	return r.URL.Path, r.Method != http.MethodGet
}

// echoFence answers 200 with the admitted fence, or "unfenced".
var echoFence = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if f, ok := httpfence.FromContext(r.Context()); ok {
		fmt.Fprint(w, f)
		return
	}
	fmt.Fprint(w, "unfenced")
})

type problemBody struct {
	Type         string `json:"type"`
	Title        string `json:"title"`
	Status       int    `json:"status"`
	Detail       string `json:"detail"`
	CurrentToken int64  `json:"current_token"`
	CurrentLock  string `json:"current_lock"`
}

func TestMiddleware(t *testing.T) {
	f10 := fence.Fence{Lock: "orders", Token: 10, Lease: "a"}
	store := &fence.Memory{}
	if err := store.Put(t.Context(), "/orders/42", f10, nil); err != nil {
		t.Fatal(err)
	}
	required := (&httpfence.Middleware{Store: store, Resource: byPath}).Handler(echoFence)
	optional := (&httpfence.Middleware{Store: store, Resource: byPath, Optional: true}).Handler(echoFence)

	tests := []struct {
		name    string
		h       http.Handler
		method  string
		headers []string
		want    int
		body    string // for 200: the body; else: part of the problem detail
	}{
		{"admitted", required, "POST", []string{`"11";lock="orders";lease="b"`}, 200, `"11";lock="orders";lease="b"`},
		{"same lease again", required, "PUT", []string{`"11";lease="b";lock="orders"`}, 200, `"11";lock="orders";lease="b"`},
		{"deprecated form", required, "PUT", []string{`11;lock="orders";lease="b"`}, 200, `"11";lock="orders";lease="b"`},
		{"stale", required, "POST", []string{`"10";lock="orders";lease="a"`}, 409, "token 10 is older than current token 11"},
		{"stale, deprecated form", required, "POST", []string{`10;lock="orders";lease="a"`}, 409, "token 10 is older than current token 11"},
		{"other lease", required, "POST", []string{`"11";lock="orders";lease="c"`}, 409, `belongs to lease "b"`},
		{"other lock", required, "POST", []string{`"99";lock="invoices";lease="c"`}, 409, `fenced by lock "orders"`},
		{"missing", required, "DELETE", nil, 428, "Fencing-Token"},
		{"missing, optional", optional, "DELETE", nil, 200, "unfenced"},
		// Optional spares only requests without a fence: one that sends a
		// fence is checked like any other.
		{"stale, optional", optional, "POST", []string{`"10";lock="orders";lease="a"`}, 409, "token 10 is older than current token 11"},
		{"other lock, optional", optional, "POST", []string{`"99";lock="invoices";lease="c"`}, 409, `fenced by lock "orders"`},
		{"malformed, optional", optional, "POST", []string{`"11";lock=orders;lease="b"`}, 400, "must be a string"},
		{"admitted, optional", optional, "PUT", []string{`"11";lock="orders";lease="b"`}, 200, `"11";lock="orders";lease="b"`},
		{"not fenced", required, "GET", nil, 200, "unfenced"},
		{"malformed", required, "POST", []string{`"11";lock=orders;lease="b"`}, 400, "must be a string"},
		{"invalid", required, "POST", []string{`"0";lock="orders";lease="b"`}, 400, "zero"},
		{"twice", required, "POST", []string{`"12";lock="orders";lease="b"`, `"12";lock="orders";lease="b"`}, 400, "more than one"},
		{"list", required, "POST", []string{`"12";lock="orders";lease="b", "13";lock="orders";lease="b"`}, 400, "invalid fence"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, "/orders/42", nil)
			for _, h := range tt.headers {
				r.Header.Add(httpfence.Header, h)
			}
			w := httptest.NewRecorder()
			tt.h.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Fatalf("%s with %q: status %d, want %d; body %s", tt.method, tt.headers, w.Code, tt.want, w.Body)
			}
			if tt.want == 200 {
				if w.Body.String() != tt.body {
					t.Errorf("%s with %q: body %q, want %q", tt.method, tt.headers, w.Body, tt.body)
				}
				return
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type = %q, want application/problem+json", ct)
			}
			var p problemBody
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
				t.Fatalf("problem body %q: %v", w.Body, err)
			}
			if p.Status != tt.want || p.Title == "" || !strings.HasPrefix(p.Type, "https://") || !strings.Contains(p.Detail, tt.body) {
				t.Errorf("problem = %+v, want status %d, a title, an https type and a detail containing %q", p, tt.want, tt.body)
			}
			if tt.want == 409 && (p.CurrentToken != 11 || p.CurrentLock != "orders") {
				t.Errorf("problem current_token, current_lock = %d, %q; want 11, %q", p.CurrentToken, p.CurrentLock, "orders")
			}
		})
	}
}

// TestMiddleware_storeFails answers 503 when the Store cannot check.
func TestMiddleware_storeFails(t *testing.T) {
	h := (&httpfence.Middleware{Store: failingStore{&fence.Memory{}}, Resource: byPath}).Handler(echoFence)
	r := httptest.NewRequest("POST", "/x", nil)
	r.Header.Set(httpfence.Header, `"1";lock="l";lease="a"`)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503; body %s", w.Code, w.Body)
	}
}

// failingStore is a Store whose fenced reads fail, as a Store whose server
// is down does.
type failingStore struct{ *fence.Memory }

func (failingStore) Get(context.Context, string, fence.Fence) ([]byte, error) {
	return nil, io.ErrUnexpectedEOF
}

// TestMiddleware_hooks: every request the middleware fences is reported
// once, with Op "http", as accepted, stale or failed; requests that pass
// unchecked are not.
func TestMiddleware_hooks(t *testing.T) {
	f10 := fence.Fence{Lock: "orders", Token: 10, Lease: "a"}
	f9 := fence.Fence{Lock: "orders", Token: 9, Lease: "b"}
	var rec fencetest.Recorder
	m := &httpfence.Middleware{Store: &fence.Memory{}, Resource: byPath, Optional: true, Hooks: rec.Hooks()}
	failing := &httpfence.Middleware{Store: failingStore{&fence.Memory{}}, Resource: byPath, Hooks: rec.Hooks()}
	ctx := fencetest.WithMark(t.Context(), "http")
	send := func(h http.Handler, method string, headers ...string) int {
		r := httptest.NewRequestWithContext(ctx, method, "/orders/42", nil)
		for _, v := range headers {
			r.Header.Add(httpfence.Header, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	h := m.Handler(echoFence)
	required := (&httpfence.Middleware{Store: &fence.Memory{}, Resource: byPath, Hooks: rec.Hooks()}).Handler(echoFence)
	for _, c := range []struct {
		h       http.Handler
		method  string
		headers []string
		want    int
	}{
		{h, "POST", []string{f10.String()}, 200},
		{h, "POST", []string{f9.String()}, 409},
		{h, "POST", []string{`"11";lock=orders;lease="b"`}, 400},
		{h, "POST", []string{f10.String(), f10.String()}, 400},
		{h, "POST", nil, 200}, // optional: passes unchecked, unreported
		{h, "GET", nil, 200},  // not fenced
		{required, "POST", nil, 428},
		{failing.Handler(echoFence), "POST", []string{f10.String()}, 503},
	} {
		if code := send(c.h, c.method, c.headers...); code != c.want {
			t.Fatalf("%s with %q: status %d, want %d", c.method, c.headers, code, c.want)
		}
	}
	fencetest.CheckReports(t, rec.Reports(), ctx, "/orders/42",
		fencetest.Want{Kind: "accepted", Op: "http", Fence: f10},
		fencetest.Want{Kind: "stale", Op: "http", Fence: f9, Current: f10},
		fencetest.Want{Kind: "failed", Op: "http", Err: fence.ErrInvalid},
		fencetest.Want{Kind: "failed", Op: "http", Err: fence.ErrInvalid},
		fencetest.Want{Kind: "failed", Op: "http", Err: fence.ErrInvalid},
		fencetest.Want{Kind: "failed", Op: "http", Fence: f10, Err: io.ErrUnexpectedEOF},
	)
}
