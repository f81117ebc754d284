package httpfence_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/httpfence"
)

// FuzzMiddleware sends arbitrary header values through the middleware:
// it must never panic, and must answer what fence.Parse and fence.Check
// say: 400 for what does not parse, 409 for a stale fence, else 200 with
// the parsed fence in the context.
func FuzzMiddleware(f *testing.F) {
	f.Add(`"1764431234567890";lock="orders";lease="k3J9x"`)
	f.Add(`"5";lock="orders";lease="k3J9x"`)
	f.Add(`"2000";lock="other";lease="x";ext=?1`)
	f.Add(`"2000" ;lock="orders";lease="x"`)
	f.Add(`1764431234567890;lock="orders";lease="k3J9x"`)
	f.Add("")
	current := fence.Fence{Lock: "orders", Token: 1000, Lease: "a"}
	f.Fuzz(func(t *testing.T, value string) {
		store := &fence.Memory{}
		if err := store.Put(t.Context(), "/r", current, nil); err != nil {
			t.Fatal(err)
		}
		var admitted fence.Fence
		h := (&httpfence.Middleware{Store: store, Resource: byPath}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			admitted, _ = httpfence.FromContext(r.Context())
		}))
		r := httptest.NewRequest("POST", "/r", nil)
		r.Header[httpfence.Header] = []string{value}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)

		parsed, err := fence.Parse(value)
		want := http.StatusOK
		switch {
		case err != nil:
			want = http.StatusBadRequest
		case fence.Check(current, parsed) != nil:
			want = http.StatusConflict
		}
		if w.Code != want {
			t.Fatalf("header %q: status %d, want %d (Parse: %v, %v)", value, w.Code, want, parsed, err)
		}
		if want == http.StatusOK && admitted != parsed {
			t.Errorf("header %q: handler got fence %v, want %v", value, admitted, parsed)
		}
	})
}
