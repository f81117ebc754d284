package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/fencelock/fencelock/fence"
)

// The HTTP resource is a fence.Store served over HTTP, so that holders in
// other processes, and requests delayed by a proxy, reach one resource.
// It is the harness's own small protocol: POST /put, /get and /delete
// with ?resource=, the fence in the Fence header (fence.Fence's text
// form), the value as the body; 409 Conflict means stale. The Chaos-Op
// header carries "client/op" for the Journal.
const (
	fenceHeader   = "Fence"
	opHeader      = "Chaos-Op"
	presentHeader = "Chaos-Present"
)

// HTTPHandler serves store over HTTP.
func HTTPHandler(store fence.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := fence.Parse(r.Header.Get(fenceHeader))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ctx := r.Context()
		var client int
		var id int64
		if _, err := fmt.Sscanf(r.Header.Get(opHeader), "%d/%d", &client, &id); err == nil {
			ctx = WithOp(ctx, client, id)
		}
		resource := r.URL.Query().Get("resource")
		var v []byte
		switch r.URL.Path {
		case "/put":
			body, rerr := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if rerr != nil {
				http.Error(w, rerr.Error(), http.StatusBadRequest)
				return
			}
			err = store.Put(ctx, resource, f, body)
		case "/get":
			v, err = store.Get(ctx, resource, f)
		case "/delete":
			err = store.Delete(ctx, resource, f)
		default:
			http.NotFound(w, r)
			return
		}
		switch {
		case errors.Is(err, fence.ErrStale):
			http.Error(w, err.Error(), http.StatusConflict)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			if v != nil {
				w.Header().Set(presentHeader, "1")
			}
			w.Write(v)
		}
	})
}

// HTTPStore is the holders' side of the HTTP resource. Load is not
// offered over HTTP.
type HTTPStore struct {
	URL    string // "http://127.0.0.1:port"
	Client *http.Client
}

var _ fence.Store = (*HTTPStore)(nil)

// Put sends a fenced write.
func (s *HTTPStore) Put(ctx context.Context, resource string, f fence.Fence, value []byte) error {
	_, err := s.do(ctx, "/put", resource, f, value)
	return err
}

// Get sends a fenced read.
func (s *HTTPStore) Get(ctx context.Context, resource string, f fence.Fence) ([]byte, error) {
	return s.do(ctx, "/get", resource, f, nil)
}

// Delete sends a fenced delete.
func (s *HTTPStore) Delete(ctx context.Context, resource string, f fence.Fence) error {
	_, err := s.do(ctx, "/delete", resource, f, nil)
	return err
}

// Load is not served over HTTP.
func (s *HTTPStore) Load(ctx context.Context, resource string) ([]byte, fence.Fence, error) {
	return nil, fence.Fence{}, errors.ErrUnsupported
}

func (s *HTTPStore) do(ctx context.Context, path, resource string, f fence.Fence, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+path+"?resource="+url.QueryEscape(resource), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set(fenceHeader, f.String())
	if t, ok := opFrom(ctx); ok {
		req.Header.Set(opHeader, strconv.Itoa(t.client)+"/"+strconv.FormatInt(t.id, 10))
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		if resp.Header.Get(presentHeader) == "" {
			return nil, nil
		}
		return b, nil
	case http.StatusConflict:
		return nil, fmt.Errorf("%s %q: %w: %s", path, resource, fence.ErrStale, bytes.TrimSpace(b))
	}
	return nil, fmt.Errorf("%s %q: %s: %s", path, resource, resp.Status, bytes.TrimSpace(b))
}
