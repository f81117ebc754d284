package fence_test

import (
	"errors"
	"math"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

func TestFence_String(t *testing.T) {
	tests := []struct {
		f    fence.Fence
		want string
	}{
		{fence.Fence{Lock: "orders:42", Token: 1764431234567890, Lease: "k3J9x"}, `"1764431234567890";lock="orders:42";lease="k3J9x"`},
		{fence.Fence{Lock: `a"b\c`, Token: 1, Lease: " "}, `"1";lock="a\"b\\c";lease=" "`},
		{fence.Fence{Lock: "l", Token: math.MaxInt64, Lease: "x"}, `"9223372036854775807";lock="l";lease="x"`},
		// A semaphore permit's slot name (the HTTP and gRPC fences carry
		// this form).
		{fence.Fence{Lock: "jobs{permit 3}", Token: 7, Lease: "x"}, `"7";lock="jobs{permit 3}";lease="x"`},
	}
	for _, tt := range tests {
		if got := tt.f.String(); got != tt.want {
			t.Errorf("%#v.String() = %s, want %s", tt.f, got, tt.want)
		}
		if got, err := fence.Parse(tt.f.String()); err != nil || got != tt.f {
			t.Errorf("Parse(%s) = %#v, %v; want %#v", tt.f.String(), got, err, tt.f)
		}
	}
}

func TestParse(t *testing.T) {
	orders := fence.Fence{Lock: "orders:42", Token: 1764431234567890, Lease: "k3J9x"}
	tests := []struct {
		in   string
		want fence.Fence
	}{
		{`"1764431234567890";lock="orders:42";lease="k3J9x"`, orders},
		{`"1764431234567890";lease="k3J9x";lock="orders:42"`, orders},
		{`  "1764431234567890";  lock="orders:42";lease="k3J9x"  `, orders},
		{`"1764431234567890";lock="x";lock="orders:42";lease="k3J9x"`, orders}, // last wins
		{`"1764431234567890";lock;lease=1;lock="orders:42";lease="k3J9x"`, orders},
		{`"1764431234567890";exp=12;lock="orders:42";v=1.5;w;lease="k3J9x";t=tok/a:b;b=:aGk=:;q=?1;s="x"`, orders},
		{`"1764431234567890";lock="orders:42";lease="k3J9x";d=@1764431234;e=@-1;u=%"caf%c3%a9 50%25";b=:aGk:;n=-999999999999.999`, orders},
		{`"9223372036854775807";lock="l";lease="x"`, fence.Fence{Lock: "l", Token: math.MaxInt64, Lease: "x"}},
		{`"1";lock="a\"b\\c";lease=" "`, fence.Fence{Lock: `a"b\c`, Token: 1, Lease: " "}},
	}
	for _, tt := range tests {
		got, err := fence.Parse(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Parse(%s) = %v, %v; want %v, nil", tt.in, got, err, tt.want)
		}
	}
}

// TestParse_legacy reads the deprecated form, with the token as a bare
// integer, which Parse accepts until v1.0.0.
func TestParse_legacy(t *testing.T) {
	orders := fence.Fence{Lock: "orders:42", Token: 1764431234567890, Lease: "k3J9x"}
	tests := []struct {
		in   string
		want fence.Fence
	}{
		{`1764431234567890;lock="orders:42";lease="k3J9x"`, orders},
		{`1764431234567890;lease="k3J9x";lock="orders:42"`, orders},
		{`  1764431234567890;  lock="orders:42";lease="k3J9x"  `, orders},
		{`01764431234567890;lock="orders:42";lease="k3J9x"`, orders},
		{`1764431234567890;exp=12;lock="orders:42";v=1.5;w;lease="k3J9x";t=tok/a:b;b=:aGk=:;q=?1;s="x"`, orders},
		{`9223372036854775807;lock="l";lease="x"`, fence.Fence{Lock: "l", Token: math.MaxInt64, Lease: "x"}},
		{`1;lock="a\"b\\c";lease=" "`, fence.Fence{Lock: `a"b\c`, Token: 1, Lease: " "}},
	}
	for _, tt := range tests {
		got, err := fence.Parse(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Parse(%s) = %v, %v; want %v, nil", tt.in, got, err, tt.want)
		}
		if s := got.String(); s[0] != '"' {
			t.Errorf("Parse(%s).String() = %s, want the token as a string", tt.in, s)
		}
	}
}

func TestParse_invalid(t *testing.T) {
	for _, in := range []string{
		``,
		` `,
		`lock="a";lease="b"`,
		`"12"`,
		`"12";lock="a"`,
		`"12";lease="b"`,
		`"0";lock="a";lease="b"`,
		`"012";lock="a";lease="b"`, // not canonical
		`"-5";lock="a";lease="b"`,
		`"+5";lock="a";lease="b"`,
		`" 5";lock="a";lease="b"`,
		`"1.5";lock="a";lease="b"`,
		`"";lock="a";lease="b"`,
		`"12a";lock="a";lease="b"`,
		`"1\"2";lock="a";lease="b"`,
		`"12;lock="a";lease="b"`, // unterminated token
		`"9223372036854775808";lock="a";lease="b"`,  // int64 overflow
		`"12345678901234567890";lock="a";lease="b"`, // 20 digits
		`%"12";lock="a";lease="b"`,                  // a display string
		`:MTI=:;lock="a";lease="b"`,                 // a byte sequence
		`0;lock="a";lease="b"`,
		`-5;lock="a";lease="b"`,
		`-;lock="a";lease="b"`,
		`+5;lock="a";lease="b"`,
		`1.5;lock="a";lease="b"`,
		`9223372036854775808;lock="a";lease="b"`,  // int64 overflow
		`12345678901234567890;lock="a";lease="b"`, // 20 digits
		`"12";lock="";lease="b"`,                  // empty lock
		`"12";lock="a";lease=""`,                  // empty lease
		`"12";lock=a;lease="b"`,                   // a token, not a string
		`"12";lock;lease="b"`,                     // a boolean
		`"12";lock="a;lease="b"`,                  // unterminated
		`"12";lock="a\n";lease="b"`,               // bad escape
		"\"12\";lock=\"a\tb\";lease=\"b\"",        // control byte
		"\"12\";lock=\"é\";lease=\"b\"",           // non-ASCII
		`"12";lock="a";lease="b";`,                // empty parameter
		`"12";lock="a";lease="b" x`,               // trailing junk
		`"12";lock="a",lease="b"`,                 // a list, not an item
		`"12";lock="a";lease="b", "13";lock="a";lease="b"`,
		`"12";Lock="a";lease="b"`,                    // keys are lower case
		`"12";lock="a";lease="b";x=1234567890123456`, // 16-digit unknown integer
		`"12";lock="a";lease="b";x=1.2345`,           // decimal with 4 fraction digits
		`"12";lock="a";lease="b";x=1234567890123.5`,  // decimal with 13 integer digits
		`"12";lock="a";lease="b";x=:a b:`,            // bad byte sequence
		`"12";lock="a";lease="b";x=:a:`,              // not base64
		`"12";lock="a";lease="b";x=:aG=k:`,           // padding inside
		`"12";lock="a";lease="b";x=?2`,               // bad boolean
		`"12";lock="a";lease="b";x=@1.5`,             // a date is an integer
		`"12";lock="a";lease="b";x=@`,                // no date
		`"12";lock="a";lease="b";x=%"a%C3%A9"`,       // upper-case hex
		`"12";lock="a";lease="b";x=%"%ff"`,           // not UTF-8
		`"12";lock="a";lease="b";x=%"é"`,             // non-ASCII
		`"12";lock="a";lease="b";x=%"ab`,             // unterminated
		`"12";lock="a";lease="b";x=%ab`,              // no quote
		`"12";lock="a";lease="b";x=(1 2)`,            // an inner list is not a parameter value
		"\"12\";lock=\"a\";lease=\"b\"\t",            // only spaces are trimmed
		`"12" ;lock="a";lease="b"`,                   // no space before ';'
		`12 ;lock="a";lease="b"`,
	} {
		if f, err := fence.Parse(in); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("Parse(%q) = %v, %v; want ErrInvalid", in, f, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(`"1764431234567890";lock="orders:42";lease="k3J9x"`)
	f.Add(`"1";lease="\"";lock="\\";x=?1;y=:aGk=:;z=1.5;w=tok;d=@-12;u=%"%c3%a9"`)
	f.Add(`"9223372036854775807";lock=" ";lease="~"`)
	f.Add("\"1\";lock=\"a\";lease=\"b\";c")
	f.Add(`1764431234567890;lock="orders:42";lease="k3J9x"`)
	f.Add(`9223372036854775807;lock=" ";lease="~"`)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := fence.Parse(s)
		if err != nil {
			if !errors.Is(err, fence.ErrInvalid) {
				t.Errorf("Parse(%q) = %v, want an error wrapping ErrInvalid", s, err)
			}
			// Whatever the input, a valid fence must still round-trip.
			in := fence.Fence{Lock: s, Token: int64(len(s)) + 1, Lease: s}
			if in.Validate() == nil {
				if out, err := fence.Parse(in.String()); err != nil || out != in {
					t.Errorf("Parse(%s) = %v, %v; want %v, nil", in.String(), out, err, in)
				}
			}
			return
		}
		if err := got.Validate(); err != nil {
			t.Errorf("Parse(%q) = %v, which fails Validate: %v", s, got, err)
		}
		again, err := fence.Parse(got.String())
		if err != nil || again != got {
			t.Errorf("Parse(%q) = %v; Parse(its String %s) = %v, %v; want the same fence", s, got, got.String(), again, err)
		}
	})
}
