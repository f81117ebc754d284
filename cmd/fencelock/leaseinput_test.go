package main

import (
	"os"
	"strings"
	"testing"
)

func TestScriptCommands_usage(t *testing.T) {
	t.Parallel()
	const url = "redis://127.0.0.1:1" // nothing listens: usage errors come first
	for _, tc := range []struct {
		env   map[string]string
		stdin string
		args  []string
	}{
		{args: []string{"acquire", "--redis", url}},
		{args: []string{"acquire", "--redis", url, "a", "b"}},
		{args: []string{"acquire", "--redis", url, "--wait", "-1s", "a"}},
		{args: []string{"acquire", "--redis", url, "a{b"}},
		{args: []string{"status", "--redis", url}},
		{args: []string{"status", "--redis", url, "a}b"}},
		{args: []string{"renew", "--redis", url, "a"}},                                        // no secret anywhere
		{stdin: "s3cret", args: []string{"renew", "--redis", url, "a"}},                       // no token
		{stdin: "FENCELOCK_SECRET=$(rm -rf /)", args: []string{"renew", "--redis", url, "a"}}, // not data
		{env: map[string]string{"FENCELOCK_SECRET": "s", "FENCELOCK_TOKEN": "x"}, args: []string{"release", "--redis", url, "a"}},
		{env: map[string]string{"FENCELOCK_SECRET": "s", "FENCELOCK_TOKEN": "1", "FENCELOCK_NAME": "a"}, args: []string{"release", "--redis", url, "b"}},
		{env: map[string]string{"FENCELOCK_SECRET": "s", "FENCELOCK_TOKEN": "1"}, args: []string{"release", "--redis", url}}, // no name
		{env: map[string]string{"FENCELOCK_SECRET": "s", "FENCELOCK_TOKEN": "1"}, args: []string{"release", "--redis", url, "a", "b"}},
	} {
		h := newHarness(t)
		h.env, h.stdin = tc.env, tc.stdin
		if h.env == nil {
			h.env = map[string]string{}
		}
		if got := h.run(tc.args...); got != exitUsage {
			t.Errorf("fencelock %q (env %v, stdin %q): exit = %d, want %d", tc.args, tc.env, tc.stdin, got, exitUsage)
		}
	}
}

func FuzzParseLeaseInput(f *testing.F) {
	for _, s := range []string{
		"FENCELOCK_NAME=a\nFENCELOCK_TOKEN=5\nFENCELOCK_SECRET=s\n",
		`{"name":"a","token":5,"secret":"s"}`,
		"s3cret\n",
		"export FENCELOCK_SECRET='x y'",
		"FENCELOCK_TOKEN=-1",
		"FENCELOCK_NAME=a\nFENCELOCK_TOKEN=5\nFENCELOCK_SECRET_FILE=/tmp/s\n",
		`{"name":"a","token":5,"secret_file":"/tmp/s"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		info, err := parseLeaseInput(in)
		if err == nil && info.Secret == "" && info.SecretFile == "" {
			t.Fatalf("parseLeaseInput(%q) = %+v, nil; want a secret, a secret file or an error", in, info)
		}
		if err == nil && info.Token < 0 {
			t.Fatalf("parseLeaseInput(%q) accepted token %d", in, info.Token)
		}
	})
}

// /dev/null is a character device but no terminal: renew with standard
// input from it reads the (empty) input, as from any file, rather than
// refusing to read "from the terminal".
func TestLeaseInput_devNullIsNoTerminal(t *testing.T) {
	t.Parallel()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	h := newHarness(t)
	c := h.cli()
	c.stdin = null
	if code := c.main(t.Context(), []string{"renew", "--redis", "redis://127.0.0.1:1", "x"}); code != exitUsage {
		t.Errorf("renew < /dev/null: exit = %d, want %d", code, exitUsage)
	}
	if msg := oneLine(t, h.stderr.String(), "fencelock renew: "); !strings.Contains(msg, "standard input: empty") {
		t.Errorf("renew < /dev/null: stderr %q, want it to have read standard input (empty)", msg)
	}
}
