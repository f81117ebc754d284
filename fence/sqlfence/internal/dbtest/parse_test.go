package dbtest_test

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/sqlfence"
)

// parseChecker applies fence texts through one database's fence function,
// each to a resource of its own, and compares the outcome with
// fence.Parse: the function must accept exactly the texts that are
// String's form of a valid fence (spaces around allowed), record the
// fence Parse reads from them, and reject every other text as invalid.
type parseChecker struct {
	name    string
	dialect sqlfence.Dialect
	db      *sql.DB
	store   *sqlfence.Store
	table   string
	n       atomic.Int64
}

func newParseCheckers(t testing.TB) []*parseChecker {
	var cs []*parseChecker
	for _, d := range databases {
		db := d.open(t)
		s, table := newFunctionStore(t, db, d.dialect)
		cs = append(cs, &parseChecker{name: d.name, dialect: d.dialect, db: db, store: s, table: table})
	}
	return cs
}

func (c *parseChecker) check(t *testing.T, text string) {
	t.Helper()
	resource := fmt.Sprintf("p%d", c.n.Add(1))
	err := applyText(t.Context(), c.db, c.dialect, c.table, resource, text)
	want, perr := fence.Parse(text)
	canonical := perr == nil && strings.Trim(text, " ") == want.String()
	switch {
	case canonical && err != nil:
		t.Errorf("%s: fence function refused %q, String's form of %#v: %v", c.name, text, want, err)
	case !canonical && err == nil:
		t.Errorf("%s: fence function accepted %q, which is not String's form of a valid fence (Parse: %#v, %v)", c.name, text, want, perr)
	case err == nil:
		_, got, lerr := c.store.Load(t.Context(), resource)
		if lerr != nil || got != want {
			t.Errorf("%s: fence function recorded %#v for %q (%v), Parse reads %#v", c.name, got, text, lerr, want)
		}
	case !isInvalid(err) && !(c.dialect == sqlfence.Postgres && (!utf8.ValidString(text) || strings.ContainsRune(text, 0))):
		// PostgreSQL refuses text that is not UTF-8, or holds a NUL,
		// before the function sees it.
		t.Errorf("%s: fence function refused %q with %v, want an invalid fence error", c.name, text, err)
	}
}

// fenceAlphabet is what the random fences are made of: the bytes that
// matter to the text form, and a few plain ones.
const fenceAlphabet = `ab"\;=, *:lockeas1`

func randomName(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(6) {
		b.WriteByte(fenceAlphabet[r.IntN(len(fenceAlphabet))])
	}
	if r.IntN(8) == 0 {
		b.WriteString([]string{`";lease="`, `";lock="`, `\"`, `\\`}[r.IntN(4)])
	}
	return b.String()
}

func randomToken(r *rand.Rand) int64 {
	switch r.IntN(6) {
	case 0:
		return r.Int64N(3) // 0 and small
	case 1:
		return 1<<63 - 1 - r.Int64N(3)
	case 2:
		return -r.Int64N(100)
	}
	return r.Int64N(1 << 53)
}

// randomText is String's form of a random fence (valid or not), then
// mutated zero to three times: bytes inserted, deleted or replaced,
// spaces around, the deprecated bare token, an extra parameter.
func randomText(r *rand.Rand) string {
	s := fence.Fence{Lock: randomName(r), Token: randomToken(r), Lease: randomName(r)}.String()
	for range r.IntN(4) {
		i := r.IntN(len(s) + 1)
		switch r.IntN(8) {
		case 0, 1:
			s = s[:i] + string(fenceAlphabet[r.IntN(len(fenceAlphabet))]) + s[i:]
		case 2, 3:
			if i < len(s) {
				s = s[:i] + s[i+1:]
			}
		case 4:
			if i < len(s) {
				s = s[:i] + string(rune(r.IntN(256))) + s[i+1:]
			}
		case 5:
			s = strings.Repeat(" ", r.IntN(3)) + s + strings.Repeat(" ", r.IntN(3))
		case 6:
			s = strings.Replace(s, `"`, "", 2) // "12";lock= becomes 12;lock=
		case 7:
			s += []string{`;x=1`, `;lock="o"`, `;lease=?1`, "\t", "\x00"}[r.IntN(5)]
		}
	}
	return s
}

// TestFunction_parse checks the fence function's reading of fence texts
// against fence.Parse, on random texts near String's form.
func TestFunction_parse(t *testing.T) {
	checkers := newParseCheckers(t)
	r := rand.New(rand.NewPCG(1, uint64(len(t.Name()))))
	accepted := 0
	for range 200 {
		text := randomText(r)
		if f, err := fence.Parse(text); err == nil && strings.Trim(text, " ") == f.String() {
			accepted++
		}
		for _, c := range checkers {
			c.check(t, text)
		}
	}
	if accepted < 30 || accepted > 170 {
		t.Errorf("%d of 200 random texts are String's form of a valid fence: want a mix of both kinds", accepted)
	}
}

// FuzzFunctionParse is TestFunction_parse for any text.
func FuzzFunctionParse(f *testing.F) {
	for _, s := range []string{
		`"1764431234567890";lock="orders:42";lease="k3J9x"`,
		` "1";lock="a";lease="b" `,
		`"1";lock="a\"b";lease="c\\d"`,
		`"1";lock="a\";lease=\"b";lease="c"`,
		`"1";lock="\\";lease="\""`,
		`"9223372036854775807";lock="a";lease="b"`,
		`"9223372036854775808";lock="a";lease="b"`,
		`"01";lock="a";lease="b"`,
		`1;lock="a";lease="b"`,
		`"1";lease="b";lock="a"`,
		`"1";lock="a";lease="b";x=?1`,
		`"1";lock="";lease="b"`,
		"\"1\";lock=\"a\x00\";lease=\"b\"",
		"\"1\";lock=\"é\";lease=\"b\"",
		`"1";lock="a";lease="b"";lease="c"`,
	} {
		f.Add(s)
	}
	checkers := newParseCheckers(f)
	f.Fuzz(func(t *testing.T, text string) {
		for _, c := range checkers {
			c.check(t, text)
		}
	})
}
