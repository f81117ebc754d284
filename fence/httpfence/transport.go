package httpfence

import (
	"fmt"
	"net/http"

	"github.com/fencelock/fencelock/fence"
)

// Transport is an http.RoundTripper that sends a fence with each request
// in the Fencing-Token header.
type Transport struct {
	// Base sends the requests. Default: http.DefaultTransport.
	Base http.RoundTripper

	// Fence returns the fence to send with req, usually the current
	// lease's; if ok is false the request goes without one. Required.
	Fence func(req *http.Request) (f fence.Fence, ok bool)
}

// RoundTrip implements http.RoundTripper. It does not change req: the
// header is set on a clone. A fence that fails fence.Fence.Validate is an
// error wrapping fence.ErrInvalid, and the request is not sent.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	f, ok := t.Fence(req)
	if !ok {
		return base.RoundTrip(req)
	}
	if err := f.Validate(); err != nil {
		if req.Body != nil {
			req.Body.Close() // RoundTrip must close the body, even on errors
		}
		return nil, fmt.Errorf("httpfence: %s %s: %w", req.Method, req.URL.Redacted(), err)
	}
	req = req.Clone(req.Context())
	req.Header.Set(Header, f.String())
	return base.RoundTrip(req)
}
