package main

import (
	"fmt"
	"strings"
)

// shellSafe reports whether b needs no quoting in a POSIX shell word.
func shellSafe(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	return strings.IndexByte("_@%+=:,./-", b) >= 0
}

// shellQuote returns s as one POSIX shell word: as is when that is safe,
// else in single quotes, with each ' written as '\”.
func shellQuote(s string) string {
	safe := s != ""
	for i := 0; i < len(s) && safe; i++ {
		safe = shellSafe(s[i])
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellAssign returns the line "KEY=VALUE" (with export, "export KEY=VALUE").
func shellAssign(export bool, key, value string) string {
	line := key + "=" + shellQuote(value)
	if export {
		line = "export " + line
	}
	return line + "\n"
}

// parseShellAssignments reads what acquire prints: lines of KEY=VALUE,
// optionally after "export", with values quoted as a POSIX shell would
// read them (single quotes, double quotes without expansion, backslash
// escapes). Comments and blank lines are skipped. Anything that a shell
// would expand or treat as syntax ($, `, ;, |, & ...) is an error: this
// reads data, it does not run a shell.
func parseShellAssignments(s string) (map[string]string, error) {
	vars := map[string]string{}
	p := shellParser{s: s}
	for {
		p.skipBlanks()
		if p.i >= len(p.s) {
			return vars, nil
		}
		if p.s[p.i] == '#' {
			for p.i < len(p.s) && p.s[p.i] != '\n' {
				p.i++
			}
			continue
		}
		key := p.name()
		if key == "export" && p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
			p.skipSpaces()
			key = p.name()
		}
		if key == "" || p.i >= len(p.s) || p.s[p.i] != '=' {
			return nil, p.errorf("want NAME=VALUE")
		}
		p.i++
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		vars[key] = v
		p.skipSpaces()
		if p.i < len(p.s) && strings.IndexByte("\r\n#", p.s[p.i]) < 0 {
			return nil, p.errorf("want one assignment per line")
		}
	}
}

type shellParser struct {
	s string
	i int
}

func (p *shellParser) errorf(format string, args ...any) error {
	line := 1 + strings.Count(p.s[:p.i], "\n")
	return fmt.Errorf("line %d: "+format, append([]any{line}, args...)...)
}

func (p *shellParser) skipSpaces() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *shellParser) skipBlanks() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

// name reads a shell variable name: [A-Za-z_][A-Za-z0-9_]*.
func (p *shellParser) name() string {
	start := p.i
	for p.i < len(p.s) {
		b := p.s[p.i]
		if b == '_' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || p.i > start && '0' <= b && b <= '9' {
			p.i++
			continue
		}
		break
	}
	return p.s[start:p.i]
}

// value reads one shell word, up to an unquoted blank or end of line.
func (p *shellParser) value() (string, error) {
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return b.String(), nil
		case c == '\'':
			end := strings.IndexByte(p.s[p.i+1:], '\'')
			if end < 0 {
				return "", p.errorf("unterminated single quote")
			}
			b.WriteString(p.s[p.i+1 : p.i+1+end])
			p.i += end + 2
		case c == '"':
			p.i++
			for {
				if p.i >= len(p.s) {
					return "", p.errorf("unterminated double quote")
				}
				d := p.s[p.i]
				if d == '"' {
					p.i++
					break
				}
				if d == '$' || d == '`' {
					return "", p.errorf("%q inside double quotes: expansion is not supported", d)
				}
				if d == '\\' && p.i+1 < len(p.s) && strings.IndexByte("$`\"\\\n", p.s[p.i+1]) >= 0 {
					p.i++
					d = p.s[p.i]
					if d == '\n' { // line continuation
						p.i++
						continue
					}
				}
				b.WriteByte(d)
				p.i++
			}
		case c == '\\':
			if p.i+1 >= len(p.s) {
				return "", p.errorf("backslash at end of input")
			}
			if p.s[p.i+1] != '\n' { // else a line continuation
				b.WriteByte(p.s[p.i+1])
			}
			p.i += 2
		case shellSafe(c) || c >= 0x80:
			b.WriteByte(c)
			p.i++
		default:
			return "", p.errorf("unquoted %q is shell syntax, not data", c)
		}
	}
	return b.String(), nil
}
