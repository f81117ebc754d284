package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A mutant is one deliberate bug: edits to the tree that break one
// promise, and the tests that must catch it.
type mutant struct {
	name   string // the definition's file name, without .txt
	breaks string // the promise it breaks, one line
	// pending, if not empty, says why the mutant is known to survive for
	// now: it is run and reported, does not fail the run while it
	// survives, and fails it once it is killed (drop the mark then).
	pending string
	edits   []edit
	tests   []testCmd
}

// An edit replaces old, which must occur exactly once in file, by new.
type edit struct {
	file     string // slash-separated, relative to the tree's root
	old, new string
}

// A testCmd is one go test invocation that should fail on the mutant.
type testCmd struct {
	dir    string   // package directory, relative to the tree's root
	args   []string // go test flags: -run REGEXP, -race, ...
	env    []string // KEY=VALUE
	server string   // a server build's name (see -servers); "" for PATH's
}

func (c testCmd) String() string {
	s := c.dir + " " + strings.Join(c.args, " ")
	for _, e := range c.env {
		s += " " + e
	}
	if c.server != "" {
		s += " server=" + c.server
	}
	return s
}

// loadDefs reads every definition in dir, sorted by name.
func loadDefs(dir string) ([]*mutant, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return nil, err
	}
	var ms []*mutant
	var errs []error
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m, err := parseDef(strings.TrimSuffix(filepath.Base(p), ".txt"), string(b))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		ms = append(ms, m)
	}
	if len(ms) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("no mutant definitions (*.txt) in %s", dir))
	}
	return ms, errors.Join(errs...)
}

// parseDef parses one definition (README.md gives the format): header
// lines "key: value", then "-- old [FILE] --" and "-- new --" sections
// in pairs, whose text is the lines between the markers, the last
// newline excluded.
func parseDef(name, text string) (*mutant, error) {
	m := &mutant{name: name}
	var file string
	var section string // "", "old" or "new"
	var lines []string
	var cur edit
	flush := func() error {
		body := strings.Join(lines, "\n")
		lines = nil
		switch section {
		case "old":
			cur.old = body
		case "new":
			cur.new = body
			if cur.old == cur.new {
				return fmt.Errorf("edit %d of %s: old and new text are the same", len(m.edits)+1, cur.file)
			}
			m.edits = append(m.edits, cur)
			cur = edit{}
		}
		return nil
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "-- ") && strings.HasSuffix(line, " --") && len(line) >= 6 {
			if err := flush(); err != nil {
				return nil, err
			}
			f := strings.Fields(strings.TrimSuffix(strings.TrimPrefix(line, "-- "), " --"))
			switch {
			case len(f) >= 1 && len(f) <= 2 && f[0] == "old" && section != "old":
				section, cur.file = "old", file
				if len(f) == 2 {
					cur.file = f[1]
				}
				if cur.file == "" {
					return nil, fmt.Errorf("line %d: no file: give file: in the header or -- old FILE --", n)
				}
			case len(f) == 1 && f[0] == "new" && section == "old":
				section = "new"
			default:
				return nil, fmt.Errorf("line %d: %q: want -- old [FILE] -- and -- new -- in pairs", n, line)
			}
			continue
		}
		if section != "" {
			lines = append(lines, line)
			continue
		}
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, ":")
		value = strings.TrimSpace(value)
		if !ok || value == "" {
			return nil, fmt.Errorf("line %d: %q: want key: value", n, line)
		}
		switch key {
		case "breaks":
			m.breaks = value
		case "pending":
			m.pending = value
		case "note":
		case "file":
			file = value
		case "test":
			c, err := parseTest(value)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			m.tests = append(m.tests, c)
		default:
			return nil, fmt.Errorf("line %d: unknown key %q", n, key)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if section == "old" {
		return nil, errors.New("-- old -- section without its -- new --")
	}
	if err := flush(); err != nil {
		return nil, err
	}
	switch {
	case m.breaks == "":
		return nil, errors.New("no breaks: line (the promise the mutant breaks)")
	case len(m.edits) == 0:
		return nil, errors.New("no edits")
	case len(m.tests) == 0:
		return nil, errors.New("no test: line")
	}
	for _, e := range m.edits {
		if e.old == "" {
			return nil, fmt.Errorf("%s: empty old text", e.file)
		}
	}
	return m, nil
}

// parseTest parses "DIR [go test flags] [KEY=VALUE] [server=NAME]".
func parseTest(s string) (testCmd, error) {
	f := strings.Fields(s)
	c := testCmd{dir: filepath.ToSlash(filepath.Clean(f[0]))}
	if strings.HasPrefix(c.dir, "-") || strings.HasPrefix(c.dir, "../") || filepath.IsAbs(c.dir) {
		return c, fmt.Errorf("test: %q: first field must be a package directory inside the tree", s)
	}
	hasRun := false
	for _, a := range f[1:] {
		k, v, isKV := strings.Cut(a, "=")
		switch {
		case k == "server" && isKV:
			c.server = v
		case isKV && !strings.HasPrefix(a, "-") && strings.ToUpper(k) == k:
			c.env = append(c.env, a)
		case strings.HasPrefix(a, "-"):
			c.args = append(c.args, a)
			hasRun = hasRun || a == "-run" || strings.HasPrefix(a, "-run=")
		default:
			if len(c.args) == 0 || !strings.HasPrefix(c.args[len(c.args)-1], "-") || strings.Contains(c.args[len(c.args)-1], "=") {
				return c, fmt.Errorf("test: %q: %q is neither a flag, its value, KEY=VALUE nor server=NAME", s, a)
			}
			c.args = append(c.args, a) // a flag's value
		}
	}
	if !hasRun {
		return c, fmt.Errorf("test: %q: no -run: name the tests that should kill the mutant", s)
	}
	return c, nil
}

// A change is a file's contents before and after a mutant's edits.
type change struct {
	file          string
	mode          os.FileMode
	before, after []byte
}

// changes returns what m's edits do to the tree at root, writing nothing.
// It fails, saying why, unless every edit's old text occurs exactly once
// in its file.
func (m *mutant) changes(root string) ([]*change, error) {
	var cs []*change
	byFile := map[string]*change{}
	for _, e := range m.edits {
		c := byFile[e.file]
		if c == nil {
			path := filepath.Join(root, filepath.FromSlash(e.file))
			st, err := os.Stat(path)
			if err != nil {
				return nil, fmt.Errorf("does not apply: %w", err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("does not apply: %w", err)
			}
			c = &change{file: e.file, mode: st.Mode().Perm(), before: b, after: b}
			byFile[e.file] = c
			cs = append(cs, c)
		}
		text := string(c.after)
		if n := strings.Count(text, e.old); n != 1 {
			return nil, fmt.Errorf("does not apply: %s: original text found %d times, want exactly once:\n%s", e.file, n, indent(e.old))
		}
		c.after = []byte(strings.Replace(text, e.old, e.new, 1))
	}
	return cs, nil
}

// apply makes m's edits to the tree at root and returns what undoes them.
// It changes nothing unless every edit applies.
func (m *mutant) apply(root string) (undo func() error, err error) {
	cs, err := m.changes(root)
	if err != nil {
		return nil, err
	}
	write := func(after bool) error {
		var errs []error
		for _, c := range cs {
			b := c.before
			if after {
				b = c.after
			}
			errs = append(errs, os.WriteFile(filepath.Join(root, filepath.FromSlash(c.file)), b, c.mode))
		}
		return errors.Join(errs...)
	}
	undo = func() error { return write(false) }
	if err := write(true); err != nil {
		return nil, errors.Join(err, undo())
	}
	return undo, nil
}

func indent(s string) string {
	return "\t| " + strings.ReplaceAll(s, "\n", "\n\t| ")
}
