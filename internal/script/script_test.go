package script

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/internal/redistest"
)

// Every script compiles on a real server, the composed ones as the client
// assembles them, and the hash go-redis sends with EVALSHA is the one the
// server computes.
func TestScripts_load(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	for _, s := range All() {
		sha, err := rdb.ScriptLoad(t.Context(), s.Src).Result()
		if err != nil {
			t.Errorf("SCRIPT LOAD %s error = %v", s.Name, err)
			continue
		}
		if sha != s.SHA() {
			t.Errorf("SCRIPT LOAD %s = %s, want %s", s.Name, sha, s.SHA())
		}
	}
}

// Every file of lua/ is a script of All, under its own name, and heads
// its contract: its name, then KEYS, ARGV (for a script that takes any)
// and returns.
func TestScripts_headers(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("lua/*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in lua/: %v", err)
	}
	byName := map[string]*Script{}
	for _, s := range All() {
		byName[s.Name] = s
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".lua")
		if byName[name] == nil {
			t.Errorf("%s: no script of All is named %q", f, name)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		if !strings.HasPrefix(src, "-- "+name+".lua: ") {
			t.Errorf("%s does not begin with its name", f)
		}
		for _, part := range []string{"-- KEYS", "-- returns"} {
			if !strings.Contains(src, part) {
				t.Errorf("%s: no %q in its header", f, part)
			}
		}
	}
}
