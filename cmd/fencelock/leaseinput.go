package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"
)

const leaseInputHelp = `The lease comes from the environment that "eval $(fencelock acquire ...)"
sets (FENCELOCK_SECRET, or the file FENCELOCK_SECRET_FILE names, with
FENCELOCK_TOKEN and FENCELOCK_NAME), or, when neither is set, from
standard input: acquire's output (shell or JSON), or the secret alone on
one line. NAME defaults to FENCELOCK_NAME. The secret is never taken
from the command line.`

// leaseInput finds the lease for renew and release: NAME from pos or
// the environment, the rest from the environment or standard input.
func (c *cli) leaseInput(pos []string) (leaseInfo, error) {
	var info leaseInfo
	info.Name = c.getenv("FENCELOCK_NAME")
	token := c.getenv("FENCELOCK_TOKEN")
	info.Secret, info.SecretFile = c.getenv("FENCELOCK_SECRET"), c.getenv("FENCELOCK_SECRET_FILE")
	if info.Secret == "" && info.SecretFile == "" {
		if f, ok := c.stdin.(*os.File); ok && isTerminal(f) {
			return info, usageErrorf("no lease: set FENCELOCK_SECRET (eval the output of acquire) or pipe acquire's output to standard input")
		}
		in, err := io.ReadAll(io.LimitReader(c.stdin, 1<<16))
		if err != nil {
			return info, fmt.Errorf("standard input: %w", err)
		}
		got, err := parseLeaseInput(string(in))
		if err != nil {
			return info, usageErrorf("standard input: %v", err)
		}
		info.Secret, info.SecretFile, info.TTLms = got.Secret, got.SecretFile, got.TTLms
		if got.Name != "" {
			info.Name = got.Name
		}
		if got.Token != 0 {
			token = strconv.FormatInt(got.Token, 10)
		}
	}
	if info.Secret == "" && info.SecretFile != "" {
		secret, err := readSecretFile(info.SecretFile)
		if err != nil {
			return info, usageErrorf("FENCELOCK_SECRET_FILE %s: %v", info.SecretFile, err)
		}
		info.Secret = secret
	}
	if len(pos) == 1 {
		if info.Name != "" && info.Name != pos[0] {
			return info, usageErrorf("NAME %q is not the lease's lock %q", pos[0], info.Name)
		}
		info.Name = pos[0]
	}
	switch {
	case info.Name == "":
		return info, usageErrorf("missing NAME (or FENCELOCK_NAME)")
	case info.Secret == "":
		return info, usageErrorf("no lease secret in FENCELOCK_SECRET or standard input")
	case token == "":
		return info, usageErrorf("missing FENCELOCK_TOKEN")
	}
	if err := validName(info.Name); err != nil {
		return info, err
	}
	n, err := strconv.ParseInt(token, 10, 64)
	if err != nil || n <= 0 {
		return info, usageErrorf("FENCELOCK_TOKEN %q is not a positive integer", token)
	}
	info.Token = n
	return info, nil
}

// parseLeaseInput reads acquire's output, shell or JSON, or a bare secret.
func parseLeaseInput(s string) (leaseInfo, error) {
	var info leaseInfo
	t := strings.TrimSpace(s)
	switch {
	case t == "":
		return info, errors.New("empty")
	case strings.HasPrefix(t, "{"):
		if err := json.Unmarshal([]byte(t), &info); err != nil {
			return info, fmt.Errorf("JSON: %v", err)
		}
		if info.Token < 0 {
			return info, fmt.Errorf("token %d is not positive", info.Token)
		}
	case strings.Contains(t, "="):
		vars, err := parseShellAssignments(s)
		if err != nil {
			return info, err
		}
		info.Name, info.Secret, info.SecretFile = vars["FENCELOCK_NAME"], vars["FENCELOCK_SECRET"], vars["FENCELOCK_SECRET_FILE"]
		if tok := vars["FENCELOCK_TOKEN"]; tok != "" {
			n, err := strconv.ParseInt(tok, 10, 64)
			if err != nil || n <= 0 {
				return info, fmt.Errorf("FENCELOCK_TOKEN %q is not a positive integer", tok)
			}
			info.Token = n
		}
		if ttl := vars["FENCELOCK_LEASE_TTL"]; ttl != "" {
			d, err := time.ParseDuration(ttl)
			if err != nil {
				return info, fmt.Errorf("FENCELOCK_LEASE_TTL %q is not a duration", ttl)
			}
			info.TTLms = d.Milliseconds()
		}
	case strings.ContainsAny(t, "\n\t "):
		return info, errors.New("want acquire's output or the secret alone")
	default:
		info.Secret = t
	}
	if info.Secret == "" && info.SecretFile == "" {
		return info, errors.New("no FENCELOCK_SECRET")
	}
	return info, nil
}

// isTerminal reports whether f is a terminal: not merely a character
// device, which /dev/null is too.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
