package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// servers finds the server builds that a test's server=NAME selects. The
// candidates are the redis-server first on PATH and the bin directories
// listed in the file that scripts/install-servers writes (one a line); a
// candidate is named after its version (redis-7.0.15, redis-8.6.3,
// valkey-9.1.2), and NAME matches a name, or a prefix of it up to a dot or
// dash ("redis-8", "valkey"), as make test's FENCELOCK_SERVERS does. A
// NAME with a slash is a bin directory itself.
type servers struct {
	list  string // the file of bin directories; may be absent
	mu    sync.Mutex
	found []server // nil until first needed
}

type server struct{ name, bin string }

// bin returns the bin directory that name selects.
func (s *servers) bin(ctx context.Context, name string) (string, error) {
	if strings.Contains(name, "/") {
		if _, err := os.Stat(filepath.Join(name, "redis-server")); err != nil {
			return "", fmt.Errorf("server=%s: %w", name, err)
		}
		return filepath.Abs(name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.found == nil {
		s.found = s.candidates(ctx)
	}
	var known []string
	for _, c := range s.found {
		if c.name == name || strings.HasPrefix(c.name, name+".") || strings.HasPrefix(c.name, name+"-") {
			return c.bin, nil
		}
		known = append(known, c.name)
	}
	return "", fmt.Errorf("server=%s: no such server (found: %s; scripts/install-servers builds Redis 8 and Valkey 9 and lists them in %s)",
		name, strings.Join(known, " "), s.list)
}

func (s *servers) candidates(ctx context.Context) []server {
	var bins []string
	if p, err := exec.LookPath("redis-server"); err == nil {
		bins = append(bins, filepath.Dir(p))
	}
	if f, err := os.Open(s.list); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if b := strings.TrimSpace(sc.Text()); b != "" {
				bins = append(bins, b)
			}
		}
		f.Close()
	}
	found := []server{}
	for _, b := range bins {
		if n := versionName(ctx, b); n != "" {
			found = append(found, server{n, b})
		}
	}
	return found
}

// versionName returns the name of the server in bin: its kind and version
// from redis-server --version ("Redis server v=8.6.3 ..."), or "".
func versionName(ctx context.Context, bin string) string {
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "redis-server"), "--version").Output()
	if err != nil {
		return ""
	}
	f := strings.Fields(string(out))
	for _, w := range f {
		if v, ok := strings.CutPrefix(w, "v="); ok && len(f) > 0 {
			return strings.ToLower(f[0]) + "-" + v
		}
	}
	return ""
}
