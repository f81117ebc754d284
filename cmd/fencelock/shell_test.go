package main

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// What acquire prints must mean the same to a real shell as to
// parseShellAssignments.
func TestShellAssign_sh(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	values := []string{"", "plain", "with space", "it's", `"double"`, "$HOME `id` $(id)", "a\nb", "back\\slash", "ünïcode", "1764431234567890;lock=\"a b\";lease=\"x\"", "'", "''", "*?[", "~", "#not-a-comment"}
	var script strings.Builder
	for i, v := range values {
		script.WriteString(shellAssign(i%2 == 0, "V"+strconv.Itoa(i), v))
	}
	var printf strings.Builder
	printf.WriteString(`eval "$(cat)"; printf '%s\0'`)
	for i := range values {
		printf.WriteString(` "$V` + strconv.Itoa(i) + `"`)
	}
	cmd := exec.Command(sh, "-c", printf.String())
	cmd.Stdin = strings.NewReader(script.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	vars, err := parseShellAssignments(script.String())
	if err != nil {
		t.Fatalf("parseShellAssignments: %v", err)
	}
	for i, want := range values {
		if i >= len(got) || got[i] != want {
			t.Errorf("sh read V%d as %q, want %q", i, got[min(i, len(got)-1)], want)
		}
		if p := vars["V"+strconv.Itoa(i)]; p != want {
			t.Errorf("parseShellAssignments read V%d as %q, want %q", i, p, want)
		}
	}
}

func TestParseShellAssignments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want map[string]string
	}{
		{"A=1\nB='x y'\n", map[string]string{"A": "1", "B": "x y"}},
		{"# comment\n\nexport A=a\\ b  # trailing\n", map[string]string{"A": "a b"}},
		{`A="q\"\$x"`, map[string]string{"A": `q"$x`}},
		{"A='it'\\''s'", map[string]string{"A": "it's"}},
		{"A=\r\nB=2\r\n", map[string]string{"A": "", "B": "2"}},
	} {
		got, err := parseShellAssignments(tc.in)
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("parseShellAssignments(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("parseShellAssignments(%q)[%s] = %q, want %q", tc.in, k, got[k], v)
			}
		}
	}
	for _, in := range []string{"A", "=1", "A=$x", "A=`id`", `A="$x"`, "A='open", `A="open`, "A=1; rm x", "A=1 B=2", "1A=x", "A=x\\"} {
		if got, err := parseShellAssignments(in); err == nil {
			t.Errorf("parseShellAssignments(%q) = %v, want an error", in, got)
		}
	}
}

func FuzzShellRoundTrip(f *testing.F) {
	for _, s := range []string{"", "a", "it's", "a\nb", "$(x)", "\\", "\"", "'\\''"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, v string, export bool) {
		line := shellAssign(export, "FENCELOCK_X", v)
		vars, err := parseShellAssignments(line)
		if err != nil {
			t.Fatalf("parseShellAssignments(%q): %v", line, err)
		}
		if got := vars["FENCELOCK_X"]; got != v {
			t.Fatalf("round trip of %q via %q = %q", v, line, got)
		}
	})
}
