// Package httpfence carries fences over HTTP: a server middleware that
// admits a request only with a fence its resource has not seen overtaken,
// and a client transport that sends the fence.
//
// The fence travels in the Fencing-Token header, in the text form of
// fence.Fence (fence.Parse), an RFC 9651 Structured Field Item that any
// standard structured-field parser reads: the token as a String of
// digits, with the lock name and lease ID as String parameters.
//
//	Fencing-Token: "1764431234567890";lock="orders:42";lease="k3J9x"
//
// Until v1.0.0 the middleware also accepts the deprecated form that
// earlier versions sent, with the token as a bare integer
// (1764431234567890;lock=...), which is not valid RFC 9651; the Transport
// sends only the new form.
//
// The middleware records the fence and runs the handler while holding a
// per-resource mutex, so no request with an older fence can run between
// the check and the handler's effect. That mutex is in-process only: if
// several processes serve the same resource, or the handler's effect can
// also be reached another way, the handler's own writes must be fenced
// too (package redisfence or sqlfence), or a stale request can still act
// after a newer one.
package httpfence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/internal/keyed"
)

// Header is the HTTP header that carries a fence.
const Header = "Fencing-Token"

// Middleware checks the fence of each request against a Store. A
// Middleware must not be copied after first use.
//
// Its answers, with an RFC 9457 problem body (application/problem+json):
//
//   - 400 Bad Request: the header is malformed, repeated, or its fence
//     fails fence.Fence.Validate;
//   - 409 Conflict: the fence is stale; the body's current_token and
//     current_lock tell the resource's current fence;
//   - 428 Precondition Required: the header is missing, unless Optional;
//   - 503 Service Unavailable: the Store failed.
type Middleware struct {
	// Store keeps the resources' fences. The middleware records fences
	// with Store.Get, so values kept in it under the same resource names
	// are read and discarded: give the middleware a Store, or a prefix,
	// of its own. Required.
	Store fence.Store

	// Resource names the resource a request touches. If ok is false the
	// request is not fenced and passes through unchecked. Required.
	Resource func(r *http.Request) (resource string, ok bool)

	// Optional lets a request for a resource pass through unchecked if it
	// has no fence header. A request that has one is checked all the
	// same. Default: false, such requests get 428.
	Optional bool

	// Hooks, if set, receive the decision on each request the middleware
	// fences, with Op "http", before the handler runs: accepted (the
	// handler runs), stale (409), or failed (400 and 428, with an error
	// wrapping fence.ErrInvalid; 503, with the Store's error). Requests
	// that pass through unchecked are not reported. Set it rather than
	// wrapping Store with fence.WithHooks, which would report each
	// checked request again, as a "get", and none of those refused before
	// the Store is asked. Default: nil, nothing is reported.
	Hooks *fence.Hooks

	locks keyed.Mutex
}

// Handler returns next behind the fence check. For an admitted request,
// FromContext(r.Context()) returns the fence.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resource, ok := m.Resource(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		values := r.Header.Values(Header)
		if len(values) == 0 && m.Optional {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		var f fence.Fence
		report := func(err error) {
			m.Hooks.Report(r.Context(), fence.AccessInfo{Op: "http", Resource: resource, Fence: f, Latency: time.Since(start), Err: err})
		}
		switch {
		case len(values) == 0:
			report(fmt.Errorf("%w: no %s header", fence.ErrInvalid, Header))
			writeProblem(w, problem{Type: "required", Title: "Fencing token required", Status: http.StatusPreconditionRequired,
				Detail: "send the lease's fence in the " + Header + " header"})
			return
		case len(values) > 1:
			report(fmt.Errorf("%w: more than one %s header", fence.ErrInvalid, Header))
			writeProblem(w, problem{Type: "malformed", Title: "Malformed fencing token", Status: http.StatusBadRequest,
				Detail: "more than one " + Header + " header"})
			return
		}
		f, err := fence.Parse(values[0])
		if err != nil {
			report(err)
			writeProblem(w, problem{Type: "malformed", Title: "Malformed fencing token", Status: http.StatusBadRequest,
				Detail: err.Error()})
			return
		}

		unlock, err := m.locks.Lock(r.Context(), resource)
		if err != nil {
			report(err)
			writeProblem(w, unavailable)
			return
		}
		defer unlock()
		_, err = m.Store.Get(r.Context(), resource, f)
		report(err)
		var stale *fence.StaleError
		switch {
		case errors.As(err, &stale):
			writeProblem(w, problem{Type: "stale", Title: "Stale fencing token", Status: http.StatusConflict,
				Detail: stale.Error(), CurrentToken: stale.Current.Token, CurrentLock: stale.Current.Lock})
			return
		case err != nil:
			writeProblem(w, unavailable)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), fenceKey{}, f)))
	})
}

type fenceKey struct{}

// FromContext returns the fence the middleware admitted the request with.
// ok is false for a request that passed through unchecked.
func FromContext(ctx context.Context) (f fence.Fence, ok bool) {
	f, ok = ctx.Value(fenceKey{}).(fence.Fence)
	return f, ok
}

// problem is an RFC 9457 problem details object, with the current fence
// as extension members for 409.
type problem struct {
	Type         string `json:"type"`
	Title        string `json:"title"`
	Status       int    `json:"status"`
	Detail       string `json:"detail,omitempty"`
	CurrentToken int64  `json:"current_token,omitempty"`
	CurrentLock  string `json:"current_lock,omitempty"`
}

// problemTypes is where the problem types are explained: this package's
// documentation.
const problemTypes = "https://pkg.go.dev/github.com/fencelock/fencelock/fence/httpfence#"

var unavailable = problem{Type: "unavailable", Title: "Fence check failed", Status: http.StatusServiceUnavailable,
	Detail: "the fence store could not be reached"}

func writeProblem(w http.ResponseWriter, p problem) {
	p.Type = problemTypes + p.Type
	body, _ := json.Marshal(p) // cannot fail: strings and ints only
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	w.Write(append(body, '\n'))
}
