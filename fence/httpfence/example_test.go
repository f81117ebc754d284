package httpfence_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/httpfence"
)

func Example() {
	// The server: every POST is fenced on its URL path.
	mw := &httpfence.Middleware{
		Store: &fence.Memory{},
		Resource: func(r *http.Request) (string, bool) {
			return r.URL.Path, r.Method == http.MethodPost
		},
	}
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, _ := httpfence.FromContext(r.Context())
		fmt.Fprintf(w, "done for token %d", f.Token)
	})))
	defer srv.Close()

	// The clients: each sends its own lease's fence.
	clientWith := func(f fence.Fence) *http.Client {
		return &http.Client{Transport: &httpfence.Transport{
			Fence: func(*http.Request) (fence.Fence, bool) { return f, true },
		}}
	}
	old := clientWith(fence.Fence{Lock: "orders:42", Token: 1764431234567890, Lease: "k3J9x"})
	newer := clientWith(fence.Fence{Lock: "orders:42", Token: 1764431299000000, Lease: "p0Qr7"})

	for _, c := range []*http.Client{old, newer, old} {
		resp, err := c.Post(srv.URL+"/orders/42/ship", "text/plain", strings.NewReader(""))
		if err != nil {
			fmt.Println(err)
			return
		}
		if resp.StatusCode == http.StatusConflict {
			var problem struct {
				Title        string `json:"title"`
				CurrentToken int64  `json:"current_token"`
			}
			json.NewDecoder(resp.Body).Decode(&problem)
			fmt.Println(resp.StatusCode, problem.Title+"; current token:", problem.CurrentToken)
		} else {
			body, _ := io.ReadAll(resp.Body)
			fmt.Println(resp.StatusCode, string(body))
		}
		resp.Body.Close()
	}
	// Output:
	// 200 done for token 1764431234567890
	// 200 done for token 1764431299000000
	// 409 Stale fencing token; current token: 1764431299000000
}
