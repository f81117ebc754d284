package chaos_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/fencelock/fencelock/chaos"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/s3fence"
	"github.com/fencelock/fencelock/fence/s3fence/s3test"
	"github.com/fencelock/fencelock/internal/redistest"
)

// TestDelayedRequestS3 is TestDelayedRequest with the resource in an S3
// bucket, fenced by s3fence.Store (one per holder), reached by each holder
// through its own proxy: its write times out, it releases, a newer holder
// reads and writes, then the old write (a conditional PUT, unfenced a
// plain one) arrives. The store's decision is its answer to the PUT, so
// the resource's journal comes from an HTTP recorder right in front of
// the S3 gateway, behind the delaying proxies (s3Recorder).
func TestDelayedRequestS3(t *testing.T) {
	runScenario(t, scenario{name: "delayed-request", adapter: "s3", shortRuns: 3, control: lateRequest, setup: func(t *testing.T) *world {
		s := newStandalone(t)
		srv := s3test.New(t)
		bucket := srv.NewBucket(t)
		rec := newS3Recorder(t, srv.Endpoint())
		id, secret := srv.Credentials()
		var proxies []*redistest.Proxy
		var clients []*s3.Client
		for range holderCount {
			p := redistest.NewProxy(t, rec.addr())
			proxies = append(proxies, p)
			clients = append(clients, opTaggedClient("http://"+p.Addr(), id, secret))
		}
		direct := srv.Client(srv.Endpoint())
		w := s.world(func(r *run) (*chaos.Journal, func(int) fence.Store) {
			prefix := r.name + "/"
			store := func(c *s3.Client) fence.Store {
				if !r.fenced {
					return &plainS3{c: c, bucket: bucket, prefix: prefix}
				}
				return s3fence.New(c, bucket, &s3fence.Options{Prefix: prefix})
			}
			views := make([]fence.Store, holderCount)
			for i := range views {
				views[i] = store(clients[i])
			}
			// The journal is used only to Load the final state.
			return &chaos.Journal{Store: store(direct)}, func(i int) fence.Store { return views[i] }
		}, fault{
			shortOnly: true,
			hold:      func(r *rand.Rand) time.Duration { return between(r, 1, 1.5) },
			inject:    func(t *testing.T, v int) { proxies[v].SetLatency(6 * ttl) },
			heal:      func(t *testing.T, v int) { proxies[v].SetLatency(0) },
		})
		w.landed = func(r *run, ops []chaos.Op) ([]chaos.Op, error) {
			return rec.journal("/"+bucket+"/"+r.name+"/", ops, r.fenced), nil
		}
		return w
	}})
}

// opHeader carries a request's holder and operation ID (chaos.WithOp) to
// the recorder.
const opHeader = "Chaos-Op"

// opTaggedClient is an S3 client of endpoint that sends each request's
// operation ID in opHeader, and does not retry.
func opTaggedClient(endpoint, id, secret string) *s3.Client {
	tag := middleware.BuildMiddlewareFunc("chaosOp", func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
		if client, op, ok := chaos.OpFrom(ctx); ok {
			if req, isHTTP := in.Request.(*smithyhttp.Request); isHTTP {
				req.Header.Set(opHeader, fmt.Sprintf("%d %d", client, op))
			}
		}
		return next.HandleBuild(ctx, in)
	})
	return s3.New(s3.Options{
		BaseEndpoint:     aws.String(endpoint),
		Region:           s3test.Region,
		UsePathStyle:     true,
		Credentials:      credentials.NewStaticCredentialsProvider(id, secret, ""),
		RetryMaxAttempts: 1,
		APIOptions: []func(*middleware.Stack) error{func(s *middleware.Stack) error {
			return s.Build.Add(tag, middleware.After)
		}},
	})
}

// s3Recorder is an HTTP proxy in front of the S3 gateway that records
// every request carrying an operation ID: when it reached the gateway
// and when the answer came back, the answer's status and, for a GET, the
// fence on the object's first line (s3fence's format). A request whose
// client has gone (a delayed request, given up on) still goes on to the
// gateway, as bytes already on the network would. It serialises nothing.
type s3Recorder struct {
	srv    *httptest.Server
	target *url.URL
	mu     sync.Mutex
	reqs   []landedReq
}

type landedReq struct {
	client    int
	id        int64
	method    string
	path      string
	status    int
	fence     fence.Fence // a GET's: the object's fence, zero if none
	call, ret int64
}

func newS3Recorder(t *testing.T, endpoint string) *s3Recorder {
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rec := &s3Recorder{target: target}
	rec.srv = httptest.NewServer(http.HandlerFunc(rec.serve))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *s3Recorder) addr() string { return strings.TrimPrefix(rec.srv.URL, "http://") }

func (rec *s3Recorder) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out := r.Clone(context.WithoutCancel(r.Context()))
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = rec.target.Scheme, rec.target.Host
	// out.Host stays the client's: it is signed.
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	call := time.Now().UnixNano()
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	rbody, err := io.ReadAll(resp.Body)
	ret := time.Now().UnixNano()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if tag := r.Header.Get(opHeader); tag != "" {
		e := landedReq{method: r.Method, path: r.URL.Path, status: resp.StatusCode, call: call, ret: ret}
		client, id, _ := strings.Cut(tag, " ")
		e.client, _ = strconv.Atoi(client)
		e.id, _ = strconv.ParseInt(id, 10, 64)
		if r.Method == http.MethodGet && resp.StatusCode/100 == 2 {
			if line, _, ok := bytes.Cut(rbody, []byte{'\n'}); ok {
				if text, ok := bytes.CutPrefix(line, []byte("fencelock-fence/1 ")); ok {
					e.fence, _ = fence.Parse(string(text))
				}
			}
		}
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, e)
		rec.mu.Unlock()
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(rbody) // the client may be gone
}

// journal makes the resource's journal of a run (its objects are under
// path) out of the recorded requests: each operation at the request that
// decided it, its last one. Fenced (s3fence): a PUT that succeeded
// accepted the operation, one refused by its condition (412, 409)
// rejected it; a GET last means the Store decided on what it read, with
// no write: accepted if the object's fence is the operation's own (a
// fenced read by the current holder), else rejected, or, if the fence
// read admits it, the holder gave up before writing (no decision).
// Unfenced, every request that the gateway answered took effect.
func (rec *s3Recorder) journal(path string, ops []chaos.Op, fenced bool) []chaos.Op {
	byID := map[int64]chaos.Op{}
	for _, op := range ops {
		byID[op.ID] = op
	}
	rec.mu.Lock()
	last := map[int64]landedReq{}
	var order []int64
	for _, e := range rec.reqs {
		if !strings.HasPrefix(e.path, path) {
			continue
		}
		if _, ok := last[e.id]; !ok {
			order = append(order, e.id)
		}
		last[e.id] = e
	}
	rec.mu.Unlock()
	var out []chaos.Op
	for _, id := range order {
		e := last[id]
		op, ok := byID[id]
		if !ok {
			op = chaos.Op{ID: id, Client: e.client, Input: chaos.Input{Op: chaos.OpPut}}
		}
		accepted, decided := true, e.status/100 == 2 || e.status == http.StatusNotFound
		if fenced {
			switch {
			case e.method == http.MethodPut && e.status/100 == 2:
			case e.method == http.MethodPut && (e.status == http.StatusPreconditionFailed || e.status == http.StatusConflict):
				accepted, decided = false, true
			case e.method == http.MethodGet && decided:
				switch {
				case e.fence == op.Input.Fence:
				case fence.Check(e.fence, op.Input.Fence) != nil:
					accepted = false
				default:
					decided = false
				}
			default:
				decided = false
			}
		}
		if !decided {
			continue
		}
		switch {
		case !accepted:
			op.Output = chaos.Output{Result: chaos.ResultStale}
		case op.Input.Op != chaos.OpGet:
			op.Output = chaos.Output{Result: chaos.ResultOK}
		case op.Output.Result != chaos.ResultOK:
			op.Output = chaos.Output{Result: chaos.ResultUnknown}
		}
		op.Err = ""
		op.Call, op.Return = e.call, e.ret
		out = append(out, op)
	}
	return out
}
