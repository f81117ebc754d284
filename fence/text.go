package fence

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxTokenDigits is the number of digits of the largest int64.
const maxTokenDigits = 19

// String returns the text form of f (see Parse), e.g.
// "1764431234567890";lock="orders:42";lease="k3J9x". For an f that does
// not pass Validate the result does not Parse.
func (f Fence) String() string {
	var b strings.Builder
	b.Grow(len(f.Lock) + len(f.Lease) + 42)
	b.WriteByte('"')
	b.WriteString(strconv.FormatInt(f.Token, 10))
	b.WriteString(`";lock=`)
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
// HTTP header and of the FENCELOCK_FENCE environment variable. It is an
// RFC 9651 Structured Field Item: a String holding the token in decimal,
// with String parameters "lock" and "lease":
//
//	"1764431234567890";lock="orders:42";lease="k3J9x"
//
// The token is a String because no other Item type can carry it: tokens
// are microsecond timestamps, 16 digits today, up to 19 for an int64,
// while an sf-integer has at most 15 digits and an sf-decimal at most 12
// before its point (and is inexact wherever a parser stores it as a
// double). Splitting the token into an Inner List of two Integers, or
// encoding it as a Byte Sequence, would be valid too, but would make every
// reader reassemble it and make the header unreadable in logs; a String of
// digits is read with the standard parser of any language and converted
// with its usual int64 parsing, which is exact, where an sf-integer would
// tempt readers to go through a double. The String must hold 1 to 19
// digits without a leading zero, and the number must be a positive int64.
//
// Deprecated form: until v1.0.0, Parse also accepts the form that String
// wrote before, with the token as a bare integer of up to 19 digits
// (1764431234567890;lock="orders:42";lease="k3J9x"). It is not valid
// RFC 9651 (an sf-integer has at most 15 digits), so standard parsers
// reject it; v1.0.0 drops it.
//
// Parameters may come in any order. Unknown parameters are ignored if they
// are well-formed RFC 9651 parameters, so that senders can add some
// without breaking older resources; as RFC 9651 says, a repeated
// parameter's last value wins. Leading and trailing spaces are ignored.
//
// Malformed text, a missing lock or lease parameter, or a fence that fails
// Validate gives an error wrapping ErrInvalid.
func Parse(s string) (Fence, error) {
	p := parser{s: strings.Trim(s, " ")}
	var f Fence
	var haveLock, haveLease bool
	var lock, lease bool // the last value is a String
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
		// The last value of a parameter wins, so its type is judged
		// only at the end.
		switch key {
		case "lock":
			f.Lock, lock = str, isString
			haveLock = true
		case "lease":
			f.Lease, lease = str, isString
			haveLease = true
		}
	}
	switch {
	case !haveLock:
		return Fence{}, fmt.Errorf("%w: no lock parameter", ErrInvalid)
	case !haveLease:
		return Fence{}, fmt.Errorf("%w: no lease parameter", ErrInvalid)
	case !lock:
		return Fence{}, fmt.Errorf("%w: parameter lock must be a string", ErrInvalid)
	case !lease:
		return Fence{}, fmt.Errorf("%w: parameter lease must be a string", ErrInvalid)
	}
	if err := f.Validate(); err != nil {
		return Fence{}, err
	}
	return f, nil
}

// parser reads an RFC 9651 Item from s, starting at i.
type parser struct {
	s string
	i int
}

func (p *parser) more() bool { return p.i < len(p.s) }
func (p *parser) peek() byte { return p.s[p.i] }

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrInvalid, p.i, fmt.Sprintf(format, args...))
}

// token reads the fence's token: a String of digits, or the deprecated
// bare Integer.
func (p *parser) token() (int64, error) {
	if p.more() && p.peek() == '"' {
		return p.stringToken()
	}
	return p.legacyToken()
}

// stringToken reads the token as a String: 1 to maxTokenDigits digits,
// the first not 0, within int64.
func (p *parser) stringToken() (int64, error) {
	start := p.i
	s, err := p.string()
	if err != nil {
		return 0, err
	}
	end := p.i
	p.i = start // errors point at the token
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, p.errorf("token %q is not a decimal number", s)
		}
	}
	switch {
	case s == "":
		return 0, p.errorf("empty token")
	case s[0] == '0':
		return 0, p.errorf("token %q is zero or has a leading zero", s)
	case len(s) > maxTokenDigits:
		return 0, p.errorf("token has more than %d digits", maxTokenDigits)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, p.errorf("token %s is out of range", s)
	}
	p.i = end
	return n, nil
}

// legacyToken reads the deprecated form of the token, an Integer of up to
// maxTokenDigits digits.
func (p *parser) legacyToken() (int64, error) {
	start := p.i
	if p.more() && p.peek() == '-' {
		p.i++
	}
	digits := p.digits()
	switch {
	case digits == 0:
		return 0, p.errorf("want a token (a string of digits)")
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
// Integer or Decimal, Token, Byte Sequence, Boolean, Date or Display
// String (strings are read by string).
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
		return p.byteSequence()
	case c == '?':
		p.i++
		if !p.more() || (p.peek() != '0' && p.peek() != '1') {
			return p.errorf("want ?0 or ?1")
		}
		p.i++
		return nil
	case c == '@':
		p.i++
		if !p.more() || (p.peek() != '-' && !isDigit(p.peek())) {
			return p.errorf("want a date's integer")
		}
		start := p.i
		if err := p.number(); err != nil {
			return err
		}
		if strings.IndexByte(p.s[start:p.i], '.') >= 0 {
			return p.errorf("a date is an integer, not a decimal")
		}
		return nil
	case c == '%':
		return p.displayString()
	default:
		return p.errorf("byte %#x cannot start a value", c)
	}
}

// byteSequence checks a Byte Sequence: base64 between colons, which must
// decode. As RFC 9651 asks, missing "=" padding is accepted.
func (p *parser) byteSequence() error {
	p.i++
	start := p.i
	for p.more() && p.peek() != ':' {
		if c := p.peek(); !isAlpha(c) && !isDigit(c) && c != '+' && c != '/' && c != '=' {
			return p.errorf("byte %#x in a byte sequence", c)
		}
		p.i++
	}
	if !p.more() {
		return p.errorf("unterminated byte sequence")
	}
	b64 := p.s[start:p.i]
	if n := len(b64) % 4; n != 0 {
		b64 += "==="[:4-n]
	}
	if _, err := base64.StdEncoding.DecodeString(b64); err != nil {
		return p.errorf("byte sequence is not base64")
	}
	p.i++
	return nil
}

// displayString checks a Display String: %" then printable ASCII other
// than " and %, or %xx escapes in lower-case hex, then "; the escaped
// bytes must be UTF-8.
func (p *parser) displayString() error {
	p.i++
	if !p.more() || p.peek() != '"' {
		return p.errorf(`want %%" to start a display string`)
	}
	p.i++
	var b []byte
	for p.more() {
		c := p.peek()
		p.i++
		switch {
		case c < 0x20 || c > 0x7e:
			return p.errorf("byte %#x in a display string", c)
		case c == '"':
			if !utf8.Valid(b) {
				return p.errorf("display string is not UTF-8")
			}
			return nil
		case c == '%':
			if p.i+2 > len(p.s) || !isLowerHex(p.s[p.i]) || !isLowerHex(p.s[p.i+1]) {
				return p.errorf("want two lower-case hex digits after %%")
			}
			b = append(b, unhex(p.s[p.i])<<4|unhex(p.s[p.i+1]))
			p.i += 2
		default:
			b = append(b, c)
		}
	}
	return p.errorf("unterminated display string")
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

func isDigit(c byte) bool    { return '0' <= c && c <= '9' }
func isLowerHex(c byte) bool { return isDigit(c) || ('a' <= c && c <= 'f') }

func unhex(c byte) byte {
	if isDigit(c) {
		return c - '0'
	}
	return c - 'a' + 10
}
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isAlpha(c byte) bool { return isLower(c) || ('A' <= c && c <= 'Z') }

// isTchar reports an RFC 9110 tchar.
func isTchar(c byte) bool {
	return isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
