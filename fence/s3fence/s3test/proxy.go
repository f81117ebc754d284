package s3test

import (
	"context"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// IgnoreConditions starts an HTTP proxy in front of s that drops the
// conditional headers of every request (If-Match, If-None-Match) and
// signs it again with the server's credentials, and returns the proxy's
// endpoint: a store that accepts conditional writes and ignores their
// conditions, as some S3-compatible stores do. It stops when t ends.
func (s *Server) IgnoreConditions(t testing.TB) string {
	t.Helper()
	target, err := url.Parse(s.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	signer := v4.NewSigner()
	creds := aws.Credentials{AccessKeyID: s.access, SecretAccessKey: s.key}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = target.Host
		h := r.Out.Header
		h.Del("If-Match")
		h.Del("If-None-Match")
		h.Del("Authorization")
		h.Del("X-Amz-Date")
		// The payload's hash stays what the client signed it with.
		hash := h.Get("X-Amz-Content-Sha256")
		if hash == "" {
			hash = "UNSIGNED-PAYLOAD"
		}
		if err := signer.SignHTTP(context.Background(), creds, r.Out, hash, "s3", Region, time.Now()); err != nil {
			t.Errorf("IgnoreConditions: signing %s %s: %v", r.Out.Method, r.Out.URL, err)
		}
	}}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}
