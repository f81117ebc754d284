package fence

import (
	"fmt"
	"strconv"
	"strings"
)

// maxTokenDigits is the deviation from RFC 8941's 15: the digits of the
// largest int64.
const maxTokenDigits = 19

// String returns the text form of f (see Parse), e.g.
// 1764431234567890;lock="orders:42";lease="k3J9x". For an f that does not
// pass Validate the result does not Parse.
func (f Fence) String() string {
	var b strings.Builder
	b.Grow(len(f.Lock) + len(f.Lease) + 40)
	b.WriteString(strconv.FormatInt(f.Token, 10))
	b.WriteString(`;lock=`)
	writeString(&b, f.Lock)
	b.WriteString(`;lease=`)
	writeString(&b, f.Lease)
	return b.String()
}

// writeString writes s as an sf-string: quoted, with \ and " escaped.
func writeString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' || s[i] == '"' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
}

// Parse reads the text form of a Fence, the value of the Fencing-Token
// HTTP header and of the FENCELOCK_FENCE environment variable. It is a
// Structured Field Item (RFC 8941): an Integer, the token, with String
// parameters "lock" and "lease":
//
//	1764431234567890;lock="orders:42";lease="k3J9x"
//
// Parse follows RFC 8941 with one deliberate deviation: the token may have
// up to 19 digits (any positive int64), where an sf-integer has at most
// 15, because tokens are microsecond timestamps, which have 16 digits
// today. Parameters may come in any order. Unknown parameters are ignored
// if they are well-formed RFC 8941 parameters, so that senders can add
// some without breaking older resources; as RFC 8941 says, a repeated
// parameter's last value wins. Leading and trailing spaces are ignored.
//
// Malformed text, a missing lock or lease parameter, or a fence that fails
// Validate gives an error wrapping ErrInvalid.
func Parse(s string) (Fence, error) {
	p := parser{s: strings.Trim(s, " ")}
	var f Fence
	var haveLock, haveLease bool
	tok, err := p.token()
	if err != nil {
		return Fence{}, err
	}
	f.Token = tok
	for p.more() {
		if p.peek() != ';' {
			return Fence{}, p.errorf("want ';' or end of text, got %q", p.peek())
		}
		p.i++
		for p.more() && p.peek() == ' ' {
			p.i++
		}
		key, err := p.key()
		if err != nil {
			return Fence{}, err
		}
		var str string
		isString := false
		if p.more() && p.peek() == '=' {
			p.i++
			if p.more() && p.peek() == '"' {
				if str, err = p.string(); err != nil {
					return Fence{}, err
				}
				isString = true
			} else if err := p.otherItem(); err != nil {
				return Fence{}, err
			}
		}
		switch key {
		case "lock", "lease":
			if !isString {
				return Fence{}, p.errorf("parameter %s must be a string", key)
			}
			if key == "lock" {
				f.Lock, haveLock = str, true
			} else {
				f.Lease, haveLease = str, true
			}
		}
	}
	switch {
	case !haveLock:
		return Fence{}, fmt.Errorf("%w: no lock parameter", ErrInvalid)
	case !haveLease:
		return Fence{}, fmt.Errorf("%w: no lease parameter", ErrInvalid)
	}
	if err := f.Validate(); err != nil {
		return Fence{}, err
	}
	return f, nil
}

// parser reads an RFC 8941 Item from s, starting at i.
type parser struct {
	s string
	i int
}

func (p *parser) more() bool { return p.i < len(p.s) }
func (p *parser) peek() byte { return p.s[p.i] }

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrInvalid, p.i, fmt.Sprintf(format, args...))
}

// token reads the fence's Integer, allowing maxTokenDigits digits.
func (p *parser) token() (int64, error) {
	start := p.i
	if p.more() && p.peek() == '-' {
		p.i++
	}
	digits := p.digits()
	switch {
	case digits == 0:
		return 0, p.errorf("want a token (an integer)")
	case digits > maxTokenDigits:
		return 0, p.errorf("token has more than %d digits", maxTokenDigits)
	case p.more() && p.peek() == '.':
		return 0, p.errorf("token must be an integer, not a decimal")
	}
	n, err := strconv.ParseInt(p.s[start:p.i], 10, 64)
	if err != nil {
		return 0, p.errorf("token out of range")
	}
	return n, nil
}

func (p *parser) digits() int {
	start := p.i
	for p.more() && isDigit(p.peek()) {
		p.i++
	}
	return p.i - start
}

// key reads a parameter key: lcalpha or "*", then lcalpha, DIGIT, "_",
// "-", "." or "*".
func (p *parser) key() (string, error) {
	start := p.i
	if !p.more() || !(isLower(p.peek()) || p.peek() == '*') {
		return "", p.errorf("want a parameter name")
	}
	p.i++
	for p.more() {
		c := p.peek()
		if !isLower(c) && !isDigit(c) && c != '_' && c != '-' && c != '.' && c != '*' {
			break
		}
		p.i++
	}
	return p.s[start:p.i], nil
}

// string reads an sf-string: printable ASCII in quotes, where only \\ and
// \" are escapes.
func (p *parser) string() (string, error) {
	p.i++ // the opening quote
	var b strings.Builder
	for p.more() {
		c := p.peek()
		p.i++
		switch {
		case c == '"':
			return b.String(), nil
		case c == '\\':
			if !p.more() || (p.peek() != '\\' && p.peek() != '"') {
				return "", p.errorf(`only \\ and \" are escapes in a string`)
			}
			b.WriteByte(p.peek())
			p.i++
		case c < 0x20 || c > 0x7e:
			return "", p.errorf("byte %#x in a string", c)
		default:
			b.WriteByte(c)
		}
	}
	return "", p.errorf("unterminated string")
}

// otherItem checks and skips the value of an unknown parameter: an
// Integer or Decimal, Token, Byte Sequence or Boolean (strings are read by
// string).
func (p *parser) otherItem() error {
	if !p.more() {
		return p.errorf("want a value")
	}
	switch c := p.peek(); {
	case c == '-' || isDigit(c):
		return p.number()
	case isAlpha(c) || c == '*':
		p.i++
		for p.more() && (isTchar(p.peek()) || p.peek() == ':' || p.peek() == '/') {
			p.i++
		}
		return nil
	case c == ':':
		p.i++
		for p.more() && p.peek() != ':' {
			if c := p.peek(); !isAlpha(c) && !isDigit(c) && c != '+' && c != '/' && c != '=' {
				return p.errorf("byte %#x in a byte sequence", c)
			}
			p.i++
		}
		if !p.more() {
			return p.errorf("unterminated byte sequence")
		}
		p.i++
		return nil
	case c == '?':
		p.i++
		if !p.more() || (p.peek() != '0' && p.peek() != '1') {
			return p.errorf("want ?0 or ?1")
		}
		p.i++
		return nil
	default:
		return p.errorf("byte %#x cannot start a value", c)
	}
}

// number checks an sf-integer (up to 15 digits) or sf-decimal (up to 12
// digits, a dot, 1 to 3 digits).
func (p *parser) number() error {
	if p.peek() == '-' {
		p.i++
	}
	n := p.digits()
	if n == 0 {
		return p.errorf("want a digit")
	}
	if !p.more() || p.peek() != '.' {
		if n > 15 {
			return p.errorf("integer has more than 15 digits")
		}
		return nil
	}
	p.i++
	if f := p.digits(); n > 12 || f == 0 || f > 3 {
		return p.errorf("malformed decimal")
	}
	return nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isAlpha(c byte) bool { return isLower(c) || ('A' <= c && c <= 'Z') }

// isTchar reports an RFC 9110 tchar.
func isTchar(c byte) bool {
	return isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
