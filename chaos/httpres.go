package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/httpfence"
)

// The HTTP resource is the library's HTTP adapter end to end: a small
// handler that keeps the values (the resource's own read and write
// logic: POST /put, /get and /delete with ?resource=, the value as the
// body) behind httpfence.Middleware over a fence.Memory, and holders
// whose client sends the fence with httpfence.Transport. A stale fence
// gets the middleware's 409 with an RFC 9457 problem body.
//
// The harness adds headers of its own, which the resource's logic never
// reads: Chaos-Op carries "client/op" and Chaos-Fence the fence the
// holder meant to send, so that the Journal records each decision, also
// in the unfenced control where no Fencing-Token is sent.
const (
	opHeader      = "Chaos-Op"
	recordHeader  = "Chaos-Fence"
	presentHeader = "Chaos-Present"
	// SentHeader carries when the holder sent the request (wall clock,
	// ns): a resource's clock would add its own scheduling delays.
	SentHeader = "Chaos-Sent"
)

// HTTPResource is one run's resource behind httpfence.Middleware.
//
// Its journal records each accepted call where the resource's logic
// performs it, in the handler behind the middleware, and each call the
// middleware turned away (a stale fence) around the middleware. Nothing
// holds a lock across the middleware and the handler but the middleware
// itself: were it not to serialise a resource's check and write, a stale
// write could land after a newer one, and the journal would show it.
type HTTPResource struct {
	// Journal records every decision; its Store is the handler's storage
	// of values (a Plain: the resource's logic does not check fences, the
	// middleware does), for Load.
	Journal *Journal

	// Stall, if set, is asked by the handler before it performs a write
	// of Counter that the middleware admitted: if it returns a channel,
	// the handler waits for it to close and then performs the write, even
	// if its client gave up meanwhile, as a resource whose storage stalls
	// after the fence check would. The middleware must keep the resource
	// to itself all that time.
	Stall func(client int) <-chan struct{}

	handler http.Handler
}

// NewHTTPResource returns a resource whose middleware checks fences
// against a fence.Memory of its own; unfenced (the negative control),
// the middleware is Optional and the holders send no fence.
func NewHTTPResource(fenced bool) *HTTPResource {
	res := &HTTPResource{Journal: &Journal{Store: &Plain{}}}
	mw := &httpfence.Middleware{
		Store:    &fence.Memory{},
		Resource: func(r *http.Request) (string, bool) { return r.URL.Query().Get("resource"), true },
		Optional: !fenced,
	}
	res.handler = mw.Handler(res.valueHandler())
	return res
}

// exchange is one request's passage through the resource: what the
// harness's headers say it is, and whether it reached the handler.
type exchange struct {
	in      Input
	reached bool
}

type exchangeKey struct{}

// valueHandler is the resource's own logic: it reads and writes values.
// Its store is the journal over the values, which records each call with
// the fence the holder meant to send (in the unfenced control the
// middleware admits requests without one).
func (res *HTTPResource) valueHandler() http.Handler {
	j := res.Journal
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := r.Context().Value(exchangeKey{}).(*exchange)
		x.reached = true
		resource, f := x.in.Resource, x.in.Fence
		ctx := r.Context()
		if client, _, ok := OpFrom(ctx); ok && x.in.Op == OpPut && resource == Counter && res.Stall != nil {
			if stall := res.Stall(client); stall != nil {
				<-stall
				ctx = context.WithoutCancel(ctx)
			}
		}
		var v []byte
		var err error
		switch r.URL.Path {
		case "/put":
			body, rerr := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if rerr != nil {
				http.Error(w, rerr.Error(), http.StatusBadRequest)
				return
			}
			err = j.Put(ctx, resource, f, body)
		case "/get":
			v, err = j.Get(ctx, resource, f)
		case "/delete":
			err = j.Delete(ctx, resource, f)
		default:
			http.NotFound(w, r)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if v != nil {
			w.Header().Set(presentHeader, "1")
		}
		w.Write(v)
	})
}

// ServeHTTP serves one request through the middleware; a decision the
// middleware made alone goes to the Journal from here.
func (res *HTTPResource) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	in := Input{Resource: r.URL.Query().Get("resource")}
	switch r.URL.Path {
	case "/put":
		in.Op, in.Value = OpPut, string(body)
	case "/get":
		in.Op = OpGet
	case "/delete":
		in.Op = OpDelete
	default:
		http.NotFound(w, r)
		return
	}
	in.Fence, _ = fence.Parse(r.Header.Get(recordHeader))
	ctx := r.Context()
	var client int
	var id int64
	_, err = fmt.Sscanf(r.Header.Get(opHeader), "%d/%d", &client, &id)
	tagged := err == nil
	if tagged {
		ctx = WithOp(ctx, client, id)
	}
	x := &exchange{in: in}
	rec := response{header: http.Header{}, status: http.StatusOK}
	req := r.WithContext(context.WithValue(ctx, exchangeKey{}, x))
	req.Body = io.NopCloser(bytes.NewReader(body))
	call := now()
	res.handler.ServeHTTP(&rec, req)
	ret := now()
	v, err := decode(in.Op, rec.status, rec.header, rec.body.Bytes())
	if !x.reached {
		// The middleware's check ran within [call, ret], under its own
		// serialisation.
		res.Journal.Add(ctx, in, v, err, call, ret)
	}
	if err == nil && tagged && in.Op == OpGet && in.Resource == Counter && res.Journal.AfterRead != nil {
		res.Journal.AfterRead(client, in.Fence)
	}
	for k, vs := range rec.header {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.status)
	w.Write(rec.body.Bytes())
}

// response captures a response, so that the journal records the
// decision, and the nemesis may pause the reader, before the reply
// leaves.
type response struct {
	header      http.Header
	status      int
	wroteHeader bool
	body        bytes.Buffer
}

func (rw *response) Header() http.Header { return rw.header }

func (rw *response) WriteHeader(status int) {
	if !rw.wroteHeader {
		rw.status, rw.wroteHeader = status, true
	}
}

func (rw *response) Write(b []byte) (int, error) {
	rw.WriteHeader(http.StatusOK)
	return rw.body.Write(b)
}

// problem is the part of the middleware's RFC 9457 body that is read.
type problem struct {
	Type   string `json:"type"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// decode turns a response into what the call returned: the value of a
// get, ErrStale for the middleware's 409 problem, another error else.
func decode(op string, status int, h http.Header, body []byte) ([]byte, error) {
	switch status {
	case http.StatusOK:
		if op != OpGet || h.Get(presentHeader) == "" {
			return nil, nil
		}
		return body, nil
	case http.StatusConflict:
		var p problem
		mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
		if mt != "application/problem+json" || json.Unmarshal(body, &p) != nil || p.Status != status {
			return nil, fmt.Errorf("409 without a problem body: %q", bytes.TrimSpace(body))
		}
		return nil, fmt.Errorf("%w: %s (%s)", fence.ErrStale, p.Detail, p.Type)
	}
	return nil, fmt.Errorf("%d: %s", status, bytes.TrimSpace(body))
}

// HTTPStore is the holders' side of the HTTP resource. Load is not
// offered over HTTP.
type HTTPStore struct {
	URL    string // "http://127.0.0.1:port"
	Client *http.Client
}

// NewHTTPClient returns a holder's client: fenced, it sends each call's
// fence with httpfence.Transport; unfenced, it sends none.
func NewHTTPClient(fenced bool) *http.Client {
	base := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}
	if !fenced {
		return &http.Client{Transport: base}
	}
	return &http.Client{Transport: &httpfence.Transport{Base: base, Fence: RequestFence}}
}

type fenceKey struct{}

// RequestFence returns the fence of the HTTPStore call req belongs to:
// the Fence of httpfence.Transport.
func RequestFence(req *http.Request) (fence.Fence, bool) {
	f, ok := req.Context().Value(fenceKey{}).(fence.Fence)
	return f, ok
}

var _ fence.Store = (*HTTPStore)(nil)

// Put sends a fenced write.
func (s *HTTPStore) Put(ctx context.Context, resource string, f fence.Fence, value []byte) error {
	_, err := s.do(ctx, OpPut, resource, f, value)
	return err
}

// Get sends a fenced read.
func (s *HTTPStore) Get(ctx context.Context, resource string, f fence.Fence) ([]byte, error) {
	return s.do(ctx, OpGet, resource, f, nil)
}

// Delete sends a fenced delete.
func (s *HTTPStore) Delete(ctx context.Context, resource string, f fence.Fence) error {
	_, err := s.do(ctx, OpDelete, resource, f, nil)
	return err
}

// Load is not served over HTTP.
func (s *HTTPStore) Load(ctx context.Context, resource string) ([]byte, fence.Fence, error) {
	return nil, fence.Fence{}, errors.ErrUnsupported
}

func (s *HTTPStore) do(ctx context.Context, op, resource string, f fence.Fence, body []byte) ([]byte, error) {
	ctx = context.WithValue(ctx, fenceKey{}, f)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/"+op+"?resource="+url.QueryEscape(resource), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set(recordHeader, f.String())
	if t, ok := opFrom(ctx); ok {
		req.Header.Set(opHeader, strconv.Itoa(t.client)+"/"+strconv.FormatInt(t.id, 10))
	}
	req.Header.Set(SentHeader, strconv.FormatInt(now(), 10))
	resp, err := s.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	v, err := decode(op, resp.StatusCode, resp.Header, b)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", op, resource, err)
	}
	return v, nil
}

// RunOf returns the lock name of the fence a request to the HTTP
// resource was sent with: which run it belongs to.
func RunOf(r *http.Request) (string, bool) {
	f, err := fence.Parse(r.Header.Get(recordHeader))
	return f.Lock, err == nil
}
