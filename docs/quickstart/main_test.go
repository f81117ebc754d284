package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's Go quick start is this program, character for character,
// so that what a newcomer copies compiles and passes vet.
func TestREADME_quickStart(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "\n```go\n")
	if !ok {
		t.Fatal("README.md has no go block")
	}
	block, _, _ = strings.Cut(block, "\n```\n")
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	// main.go's package comment says what it is; the README shows the rest.
	_, want, _ := strings.Cut(string(src), "\npackage main\n")
	want = "package main\n" + want
	if got := block + "\n"; got != want {
		t.Errorf("README.md's quick start differs from docs/quickstart/main.go:\ngot:\n%s\nwant:\n%s", got, want)
	}
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Every relative link in README.md and docs/ names a file that exists
// and, if it has one, a heading of that file: moving a section cannot
// leave a dead link behind.
func TestDocs_links(t *testing.T) {
	files, err := filepath.Glob("../*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	checked := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRE.FindAllStringSubmatch(string(b), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(link, "#")
			target := file
			if path != "" {
				target = filepath.Join(filepath.Dir(file), path)
			}
			tb, err := os.ReadFile(target)
			if err != nil {
				if fi, serr := os.Stat(target); serr == nil && fi.IsDir() {
					checked++
					continue
				}
				t.Errorf("%s links to %s: %v", file, link, err)
				continue
			}
			checked++
			if anchor != "" && !hasAnchor(string(tb), anchor) {
				t.Errorf("%s links to %s: %s has no heading #%s", file, link, target, anchor)
			}
		}
	}
	if checked < 10 {
		t.Errorf("checked %d links, want at least 10", checked)
	}
}

// hasAnchor reports whether markdown text has a heading whose GitHub
// anchor is anchor.
func hasAnchor(text, anchor string) bool {
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		if b.String() == anchor {
			return true
		}
	}
	return false
}
