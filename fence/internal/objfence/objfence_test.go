package objfence

import (
	"bytes"
	"errors"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fencelock/fencelock/fence"
)

func TestKey(t *testing.T) {
	for _, c := range []struct{ resource, want string }{
		{"orders:42", "orders:42"},
		{"state/prod/terraform.tfstate", "state/prod/terraform.tfstate"},
		{"", "~"},
		{"~", "%7E"},
		{"%", "%25"},
		{" ", "%20"},
		{"a ", "a%20"},
		{"with space", "with%20space"},
		{"{orders}", "%7Borders%7D"},
		{`a\b`, "a%5Cb"},
		{"ü", "%C3%BC"},
		{"\xff", "%FF"},
		{"/", "%2F"},
		{"/a", "%2Fa"},
		{"a/", "a%2F"},
		{"a//b", "a%2F/b"},
		{"a///b", "a%2F%2F/b"},
		{".", "%2E"},
		{"..", "%2E%2E"},
		{"...", "..."},
		{"a/./b", "a/%2E/b"},
		{"a/../b", "a/%2E%2E/b"},
		{"./a", "%2E/a"},
		{"a/.", "a/%2E"},
		{"./", ".%2F"},
		{".a/b.", ".a/b."},
		{"a//.", "a%2F/%2E"},
	} {
		if got := Key("", c.resource); got != c.want {
			t.Errorf("Key(%q) = %q, want %q", c.resource, got, c.want)
		}
		if got := Key("p/", c.resource); got != "p/"+c.want {
			t.Errorf("Key(%q, %q) = %q, want %q", "p/", c.resource, got, "p/"+c.want)
		}
	}
}

// checkKey fails t unless Key(prefix, resource) is a key that object
// stores take as it is and that decodes back to resource.
func checkKey(t *testing.T, prefix, resource string) {
	t.Helper()
	k := Key(prefix, resource)
	if len(k) > MaxKey {
		t.Fatalf("Key(%q) is %d bytes, want at most %d", resource, len(k), MaxKey)
	}
	rest, ok := strings.CutPrefix(k, prefix)
	if !ok {
		t.Fatalf("Key(%q, %q) = %q, want the prefix first", prefix, resource, k)
	}
	if !utf8.ValidString(k) {
		t.Errorf("Key(%q) = %q, not UTF-8", resource, k)
	}
	for _, seg := range strings.Split(rest, "/") {
		if seg == "" || seg == "." || seg == ".." {
			t.Errorf("Key(%q) = %q has the path segment %q", resource, k, seg)
		}
	}
	if strings.ContainsAny(rest, "\\+ ") {
		t.Errorf("Key(%q) = %q holds a byte that stores rewrite", resource, k)
	}
	if len(k) == MaxKey || strings.Contains(rest, "~") && rest != "~" {
		return // cut and hashed: unique, not decodable
	}
	got := ""
	if rest != "~" {
		var err error
		if got, err = url.PathUnescape(rest); err != nil {
			t.Fatalf("Key(%q) = %q does not decode: %v", resource, k, err)
		}
	}
	if got != resource {
		t.Errorf("Key(%q) = %q decodes to %q", resource, k, got)
	}
}

func TestKey_long(t *testing.T) {
	long := strings.Repeat("x", MaxKey)
	a, b := Key("p/", long), Key("p/", long+"y")
	if a == b {
		t.Errorf("Key of two long names = %q for both", a)
	}
	checkKey(t, "p/", long)
	checkKey(t, "p/", strings.Repeat("é", MaxKey))
	// Escapes are not cut through.
	for n := MaxKey - 80; n < MaxKey-60; n++ {
		k := Key("", strings.Repeat("a", n)+strings.Repeat(" ", 40))
		head, _, _ := strings.Cut(k, "~")
		if i := strings.LastIndexByte(head, '%'); i >= 0 && i > len(head)-3 {
			t.Errorf("Key cut through an escape: %q", head[max(0, len(head)-10):])
		}
	}
}

func FuzzKey(f *testing.F) {
	for _, s := range []string{"", "a", "a//b", "./..", "~", "%2F", "ü/\xff", strings.Repeat("/.", 600)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, resource string) {
		checkKey(t, "fence/", resource)
	})
}

func TestEncode_decode(t *testing.T) {
	f := fence.Fence{Lock: `orders "x" \ y`, Token: 1 << 62, Lease: "k3J9x"}
	for _, value := range [][]byte{nil, []byte("v"), []byte("line\nline\n"), bytes.Repeat([]byte{0, '\n'}, 100)} {
		body := Encode(f, value)
		got, v, complete, err := Decode(body)
		if err != nil || !complete || got != f || !bytes.Equal(v, value) {
			t.Errorf("Decode(Encode(%v, %q)) = %v, %q, %v, %v", f, value, got, v, complete, err)
		}
		if len(value) == 0 && v != nil {
			t.Errorf("Decode of an empty value = %q, want nil", v)
		}
		// Any head of the first line is incomplete, not malformed.
		line := bytes.IndexByte(body, '\n')
		for n := 0; n <= line; n++ {
			if _, _, complete, err := Decode(body[:n]); complete || err != nil {
				t.Fatalf("Decode(first %d bytes) = complete %v, %v; want incomplete", n, complete, err)
			}
		}
	}
}

func TestDecode_wrongFormat(t *testing.T) {
	for _, body := range []string{
		"{}",
		"fencelock-fence/2 x\n",
		"fencelock-fence/1 \n",
		"fencelock-fence/1 12;lock=\"a\"\n", // no lease
		"fencelock-fence/1 \"0\";lock=\"a\";lease=\"b\"\nv",
		"Fencelock-fence/1 \"1\";lock=\"a\";lease=\"b\"\nv",
	} {
		if _, _, _, err := Decode([]byte(body)); !errors.Is(err, ErrWrongFormat) {
			t.Errorf("Decode(%q) = %v, want ErrWrongFormat", body, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(Encode(fence.Fence{Lock: "orders", Token: 10, Lease: "a"}, []byte("v"))))
	f.Add([]byte("fencelock-fence/1 \"1\";lock=\"a\";lease=\"b\";x=?1\n"))
	f.Add([]byte("fencelock-fence/1 1;lock=\"a\";lease=\"b\"\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		fc, value, complete, err := Decode(body)
		if err != nil || !complete {
			return
		}
		if err := fc.Validate(); err != nil {
			t.Fatalf("Decode(%q) gave the fence %v, which is invalid: %v", body, fc, err)
		}
		// What decodes re-encodes to a body that decodes the same.
		g, v, complete, err := Decode(Encode(fc, value))
		if err != nil || !complete || g != fc || !bytes.Equal(v, value) {
			t.Fatalf("Decode(Encode(Decode(%q))) = %v, %q, %v, %v; want %v, %q", body, g, v, complete, err, fc, value)
		}
	})
}
