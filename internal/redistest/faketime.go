package redistest

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A server started with Options.FakeTime runs with libfaketime preloaded,
// reading its clock offset from a file in its directory on every call
// (FAKETIME_NO_CACHE), so that SetClock takes effect at once, without a
// restart, and survives Restart. Only the wall clock is faked
// (FAKETIME_DONT_FAKE_MONOTONIC): it is what TIME, key expiry (PX, PEXPIRE,
// PTTL) and hence fencelock's clock floor read, while the event loop's
// timers keep the monotonic clock and go on firing.

// clockFile is the offset file libfaketime reads, in the server's directory.
const clockFile = "faketime.rc"

// libFakeTimeEnv names an environment variable that overrides where
// libfaketime is looked for.
const libFakeTimeEnv = "FENCELOCK_LIBFAKETIME"

var (
	libOnce sync.Once
	libPath string
	libErr  error
)

// LibFakeTime returns the path of libfaketime's shared library: that of
// FENCELOCK_LIBFAKETIME if set, else Debian's (multiarch or not), else
// whatever `dpkg -L libfaketime` lists. Not the libfaketimeMT variant:
// under it redis-server's first clock reads recurse and fail.
func LibFakeTime() (string, error) {
	libOnce.Do(func() { libPath, libErr = findLibFakeTime() })
	return libPath, libErr
}

func findLibFakeTime() (string, error) {
	if p := os.Getenv(libFakeTimeEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w (%s)", libFakeTimeEnv, p, err, installFakeTime)
		}
		return p, nil
	}
	var candidates []string
	const name = "libfaketime.so.1"
	m, _ := filepath.Glob("/usr/lib/*/faketime/" + name)
	candidates = append(candidates, m...)
	candidates = append(candidates, "/usr/lib/faketime/"+name, "/usr/local/lib/faketime/"+name)
	if out, err := exec.Command("dpkg", "-L", "libfaketime").Output(); err == nil {
		for line := range strings.Lines(string(out)) {
			if line = strings.TrimSpace(line); strings.HasSuffix(line, "/"+name) {
				candidates = append(candidates, line)
			}
		}
	}
	for _, p := range candidates {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("libfaketime is not installed: " + installFakeTime)
}

const installFakeTime = "install Debian's faketime package (apt-get install faketime; scripts/install-faketime does it), or set " + libFakeTimeEnv + " to its libfaketime.so.1"

// ErrFakeTimeUnsupported is returned by FakeTimeSupported for a
// redis-server that cannot run under libfaketime.
var ErrFakeTimeUnsupported = errors.New("redistest: this redis-server cannot run under libfaketime")

// FakeTimeSupported reports whether the redis-server on PATH can run
// under libfaketime: an error wrapping ErrFakeTimeUnsupported if not, or
// the error of LibFakeTime if libfaketime is missing. A server linked
// against the system's libjemalloc (Debian's Redis 7.0) deadlocks at
// startup under libfaketime 0.9.10: jemalloc's first allocation reads the
// clock, libfaketime initialises itself in that call and allocates
// (dlsym's error message, sem_open), and jemalloc's init lock is taken
// twice (wolfcw/libfaketime#130). Servers built with Redis's bundled,
// prefixed jemalloc (scripts/install-servers) are not affected.
func FakeTimeSupported() error {
	if _, err := LibFakeTime(); err != nil {
		return err
	}
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return err
	}
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		return err
	}
	for _, l := range libs {
		if strings.HasPrefix(l, "libjemalloc.so") {
			return fmt.Errorf("%w: %s links the system's %s, which deadlocks with libfaketime at startup (wolfcw/libfaketime#130)", ErrFakeTimeUnsupported, path, l)
		}
	}
	return nil
}

// RequireFakeTime fails the test if libfaketime is not installed and
// skips it if the redis-server on PATH cannot run under it (see
// FakeTimeSupported).
func RequireFakeTime(tb testing.TB) {
	tb.Helper()
	err := FakeTimeSupported()
	switch {
	case errors.Is(err, ErrFakeTimeUnsupported):
		tb.Skipf("%v; the clock-jump tests run on the servers that scripts/install-servers builds", err)
	case err != nil:
		tb.Fatalf("redistest: %v", err)
	}
}

// fakeTimeEnv returns the environment that runs the server under
// libfaketime, writing a zero offset unless the clock file exists.
func (s *Server) fakeTimeEnv() ([]string, error) {
	lib, err := LibFakeTime()
	if err != nil {
		return nil, err
	}
	file := filepath.Join(s.dir, clockFile)
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
		if err := writeClock(file, 0); err != nil {
			return nil, err
		}
	}
	return []string{
		"LD_PRELOAD=" + lib,
		"FAKETIME_TIMESTAMP_FILE=" + file,
		"FAKETIME_NO_CACHE=1",
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
	}, nil
}

// SetClock steps the server's wall clock to the real time plus offset
// (negative: behind), at once and while it runs: a clock jump, as an
// operator's `date -s` or a misconfigured NTP would make. It returns once
// the server's TIME shows the step (Valkey reads the clock once per
// event-loop iteration, so the step shows from the next one). The offset
// stays across Restart. The server must have been started with
// Options.FakeTime.
func (s *Server) SetClock(tb testing.TB, offset time.Duration) {
	tb.Helper()
	if !s.opts.FakeTime {
		tb.Fatalf("redistest: SetClock on %s, which was not started with Options.FakeTime", s.Addr())
	}
	if err := writeClock(filepath.Join(s.dir, clockFile), offset); err != nil {
		tb.Fatalf("redistest: SetClock: %v", err)
	}
	s.mu.Lock()
	running := s.proc != nil
	s.mu.Unlock()
	if !running {
		return
	}
	rdb := s.client()
	defer rdb.Close()
	const slack = 10 * time.Millisecond
	deadline := time.Now().Add(5 * time.Second)
	for {
		before := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		got, err := rdb.Time(ctx).Result()
		cancel()
		after := time.Now()
		if err == nil && !got.Before(before.Add(offset-slack)) && !got.After(after.Add(offset+slack)) {
			return
		}
		if after.After(deadline) {
			tb.Fatalf("redistest: SetClock(%v) on %s: TIME = %v, %v; want %v ± %v", offset, s.Addr(), got, err, before.Add(offset), after.Sub(before)+slack)
		}
		time.Sleep(time.Millisecond) // a poll with a deadline: the next event-loop iteration
	}
}

// writeClock writes libfaketime's relative offset ("+1.500000" seconds)
// to a new file and renames it into place, so that the server never reads
// a half-written offset.
func writeClock(file string, offset time.Duration) error {
	tmp := file + ".new"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%+.6f\n", offset.Seconds()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}
