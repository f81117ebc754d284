package sfinterop_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/dunglas/httpsfv"

	"github.com/fencelock/fencelock/fence"
)

// FuzzParse_differential gives the same text to fence.Parse and to
// httpsfv. For the current form (the token as a String) they must agree
// exactly: fence.Parse accepts a text if and only if httpsfv reads it as
// an Item from which a resource in another language would take a valid
// fence, and both find the same fence. For the deprecated form, a bare
// integer, httpsfv is the judge only while the integer has at most 15
// digits; fence.Parse accepts up to 19 on purpose.
//
// One deviation of httpsfv is excused: it rejects Byte Sequences without
// "=" padding, which RFC 9651 (section 4.2.7) says parsers should accept.
func FuzzParse_differential(f *testing.F) {
	for _, s := range []string{
		`"1796112827851832";lock="orders:42";lease="k3J9x"`,
		`"1";lock="a\"b\\c";lease=" ";x=?1;y=:aGk=:;z=1.5;w=tok/a:b;d=@-12;u=%"caf%c3%a9"`,
		`"9223372036854775807";lock="l";lease="x"`,
		`"9223372036854775808";lock="l";lease="x"`,
		`"012";lock="l";lease="x"`,
		`  "12";  lock="l";lease="x"  `,
		`"12";lock="l";lease="x";lock="m"`,
		`"12";lock="l";lease="x";b=:aGk:`,
		`"12";lock="l";lease="x";u=%"%ff"`,
		`"12";lock=l;lease="x"`,
		`"12";lock="l";lease="x", "13"`,
		`999999999999999;lock="l";lease="x"`,
		`1796112827851832;lock="l";lease="x"`,
		`12;lock="l";lease="x";n=1234567890123.5`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ours, ourErr := fence.Parse(s)
		if ourErr != nil && !errors.Is(ourErr, fence.ErrInvalid) {
			t.Fatalf("fence.Parse(%q) error = %v, want one wrapping ErrInvalid", s, ourErr)
		}
		item, theirErr := httpsfv.UnmarshalItem([]string{s})
		var corrupt base64.CorruptInputError
		if errors.As(theirErr, &corrupt) {
			return // httpsfv's padding deviation: no verdict to compare
		}
		var theirs fence.Fence
		if theirErr == nil {
			theirs, theirErr = fenceOf(item)
		}
		trimmed := strings.TrimLeft(s, " ")
		switch {
		case strings.HasPrefix(trimmed, `"`):
			if (ourErr == nil) != (theirErr == nil) || (ourErr == nil && ours != theirs) {
				t.Fatalf("text %q:\nfence.Parse = %v, %v\nhttpsfv     = %v, %v", s, ours, ourErr, theirs, theirErr)
			}
		case theirErr == nil:
			t.Fatalf("text %q: httpsfv read a fence %v from something other than a String", s, theirs)
		default:
			legacy(t, s, ours, ourErr)
		}
	})
}

// legacy compares the verdicts on a text in the deprecated form, or in
// no form at all.
func legacy(t *testing.T, s string, ours fence.Fence, ourErr error) {
	item, err := httpsfv.UnmarshalItem([]string{s})
	num := strings.TrimPrefix(strings.TrimLeft(s, " "), "-")
	if digits := len(num) - len(strings.TrimLeft(num, "0123456789")); digits > 15 {
		// Beyond an sf-integer: fence.Parse may accept it, as it must
		// until v1.0.0, but no structured-field parser may.
		if err == nil {
			t.Fatalf("text %q: httpsfv read an integer of more than 15 digits: %v", s, item.Value)
		}
		return
	}
	if err != nil {
		if ourErr == nil {
			t.Fatalf("text %q: fence.Parse = %v, but httpsfv rejects it: %v", s, ours, err)
		}
		return
	}
	n, ok := item.Value.(int64)
	if !ok {
		if ourErr == nil {
			t.Fatalf("text %q: fence.Parse = %v, but httpsfv reads a %T token", s, ours, item.Value)
		}
		return
	}
	lock, ok1 := param(item, "lock")
	lease, ok2 := param(item, "lease")
	want := fence.Fence{Lock: lock, Token: n, Lease: lease}
	valid := ok1 && ok2 && want.Validate() == nil
	if valid != (ourErr == nil) || (valid && ours != want) {
		t.Fatalf("text %q:\nfence.Parse = %v, %v\nhttpsfv     = %v, valid: %v", s, ours, ourErr, want, valid)
	}
}

// FuzzString_readByHTTPSFV writes arbitrary valid fences and has httpsfv
// read them back.
func FuzzString_readByHTTPSFV(f *testing.F) {
	f.Add("orders:42", int64(1796112827851832), "k3J9x")
	f.Add(`"\`, int64(1), `\"`)
	f.Add("l", int64(1<<62), "~")
	f.Fuzz(func(t *testing.T, lock string, token int64, lease string) {
		in := fence.Fence{Lock: lock, Token: token, Lease: lease}
		if in.Validate() != nil {
			return
		}
		item, err := httpsfv.UnmarshalItem([]string{in.String()})
		if err != nil {
			t.Fatalf("httpsfv.UnmarshalItem(%s) error = %v", in.String(), err)
		}
		if got, err := fenceOf(item); err != nil || got != in {
			t.Fatalf("httpsfv.UnmarshalItem(%s) = %v, %v; want %v", in.String(), got, err, in)
		}
	})
}
