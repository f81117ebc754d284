package httpfence_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/httpfence"
)

func TestTransport(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		io.WriteString(w, strings.Join(r.Header.Values(httpfence.Header), "|"))
	}))
	defer srv.Close()
	client := &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport, Fence: sendFence}}
	get := func(ctx context.Context) (string, error) {
		req, _ := http.NewRequestWithContext(ctx, "PUT", srv.URL, strings.NewReader("body"))
		req.Header.Set(httpfence.Header, "caller's own value")
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if got := req.Header.Get(httpfence.Header); got != "caller's own value" {
			t.Errorf("the caller's request header = %q after RoundTrip, want it unchanged", got)
		}
		return string(b), nil
	}

	f := fence.Fence{Lock: "orders:42", Token: 1764431234567890, Lease: "k3J9x"}
	got, err := get(context.WithValue(t.Context(), sendKey{}, f))
	if err != nil || got != f.String() {
		t.Errorf("with a fence: server got %q, %v; want %q", got, err, f.String())
	}

	got, err = get(t.Context())
	if err != nil || got != "caller's own value" {
		t.Errorf("without a fence: server got %q, %v; want the caller's header untouched", got, err)
	}

	before := requests.Load()
	_, err = get(context.WithValue(t.Context(), sendKey{}, fence.Fence{Lock: "orders:42", Token: 0, Lease: "k3J9x"}))
	if !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("with an invalid fence: error %v, want ErrInvalid", err)
	}
	if n := requests.Load() - before; n != 0 {
		t.Errorf("with an invalid fence: %d requests reached the server, want 0", n)
	}
}
