package sfinterop_test

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/fencelock/fencelock/fence"
)

var fences = []fence.Fence{
	{Lock: "orders:42", Token: 1796112827851832, Lease: "k3J9x"},
	{Lock: "l", Token: 1, Lease: "x"},
	{Lock: "l", Token: 1<<53 + 1, Lease: "x"},
	{Lock: "l", Token: math.MaxInt64, Lease: "x"},
	{Lock: `a"b\c`, Token: 999999999999999, Lease: " "},
	{Lock: " !#$%&'()*+,-./:;<=>?@[]^_`{|}~", Token: 1000000000000000, Lease: `\"`},
}

// TestString_readByHTTPSFV shows that what fence.Fence.String writes is a
// valid structured field, read by httpsfv as a String token with String
// parameters lock and lease, and that httpsfv writes it back byte for
// byte: String is RFC 9651's canonical serialisation.
func TestString_readByHTTPSFV(t *testing.T) {
	for _, f := range fences {
		text := f.String()
		item, err := httpsfv.UnmarshalItem([]string{text})
		if err != nil {
			t.Errorf("httpsfv.UnmarshalItem(%s) error = %v", text, err)
			continue
		}
		got, err := fenceOf(item)
		if err != nil || got != f {
			t.Errorf("httpsfv.UnmarshalItem(%s) = %v (%v); want %v", text, got, err, f)
		}
		if names := item.Params.Names(); strings.Join(names, ",") != "lock,lease" {
			t.Errorf("httpsfv.UnmarshalItem(%s) parameters = %q, want [lock lease]", text, names)
		}
		again, err := httpsfv.Marshal(item)
		if err != nil || again != text {
			t.Errorf("httpsfv.Marshal(UnmarshalItem(%s)) = %s, %v; want the same text", text, again, err)
		}
	}
}

// TestParse_readsHTTPSFV shows that fence.Parse reads fences that httpsfv
// wrote, with unknown parameters of every RFC 9651 type that a newer
// sender might add.
func TestParse_readsHTTPSFV(t *testing.T) {
	for _, f := range fences {
		item := httpsfv.NewItem(strconv.FormatInt(f.Token, 10))
		item.Params.Add("v", int64(-999999999999999))
		item.Params.Add("lease", f.Lease)
		item.Params.Add("dec", 12.5)
		item.Params.Add("tok", httpsfv.Token("x/y:z"))
		item.Params.Add("lock", f.Lock)
		item.Params.Add("bin", []byte("\x00\xffbytes"))
		item.Params.Add("flag", true)
		item.Params.Add("off", false)
		item.Params.Add("at", time.Unix(1796112827, 0))
		item.Params.Add("name", httpsfv.DisplayString("café 100% \"ok\""))
		item.Params.Add("*s", "x")
		text, err := httpsfv.Marshal(item)
		if err != nil {
			t.Fatalf("httpsfv.Marshal: %v", err)
		}
		got, err := fence.Parse(text)
		if err != nil || got != f {
			t.Errorf("fence.Parse(%s) = %v, %v; want %v, nil", text, got, err, f)
		}
	}
}

// TestLegacy_rejectedByHTTPSFV shows why the form changed: the deprecated
// form, a bare integer token, is not a structured field once the token
// has 16 digits, as every microsecond token since 2001 has. fence.Parse
// still reads it.
func TestLegacy_rejectedByHTTPSFV(t *testing.T) {
	legacy := `1796112827851832;lock="orders:42";lease="k3J9x"`
	if item, err := httpsfv.UnmarshalItem([]string{legacy}); err == nil {
		t.Errorf("httpsfv.UnmarshalItem(%s) = %v, want an error (an sf-integer has at most 15 digits)", legacy, item.Value)
	}
	want := fence.Fence{Lock: "orders:42", Token: 1796112827851832, Lease: "k3J9x"}
	if got, err := fence.Parse(legacy); err != nil || got != want {
		t.Errorf("fence.Parse(%s) = %v, %v; want %v, nil", legacy, got, err, want)
	}
}

// fenceOf reads a fence from a parsed item the way a resource written in
// another language would: the token is a String of digits without a
// leading zero, parsed as an int64; lock and lease are String parameters.
func fenceOf(item httpsfv.Item) (fence.Fence, error) {
	tok, ok := item.Value.(string)
	if !ok {
		return fence.Fence{}, errors.New("token is not a string")
	}
	if tok == "" || tok[0] == '0' || strings.Trim(tok, "0123456789") != "" {
		return fence.Fence{}, errors.New("token is not a canonical decimal")
	}
	n, err := strconv.ParseInt(tok, 10, 64)
	if err != nil {
		return fence.Fence{}, err
	}
	lock, ok1 := param(item, "lock")
	lease, ok2 := param(item, "lease")
	if !ok1 || !ok2 {
		return fence.Fence{}, errors.New("lock or lease missing or not a string")
	}
	f := fence.Fence{Lock: lock, Token: n, Lease: lease}
	return f, f.Validate()
}

func param(item httpsfv.Item, key string) (string, bool) {
	v, ok := item.Params.Get(key)
	s, isString := v.(string)
	return s, ok && isString
}
