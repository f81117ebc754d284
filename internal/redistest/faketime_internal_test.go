package redistest

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestFindLibFakeTime_missing: a libfaketime that is not there is an
// error that names the package to install, for the tests to fail with.
func TestFindLibFakeTime_missing(t *testing.T) {
	t.Setenv(libFakeTimeEnv, filepath.Join(t.TempDir(), "libfaketime.so.1"))
	_, err := findLibFakeTime()
	if err == nil || !strings.Contains(err.Error(), "faketime package") {
		t.Errorf("findLibFakeTime() with %s pointing nowhere = %v, want an error naming the faketime package", libFakeTimeEnv, err)
	}
}

// TestFindLibFakeTime: where Debian's faketime package is installed (CI
// installs it), the library is found.
func TestFindLibFakeTime(t *testing.T) {
	t.Setenv(libFakeTimeEnv, "")
	p, err := findLibFakeTime()
	if err != nil || !strings.HasSuffix(p, "/libfaketime.so.1") {
		t.Errorf("findLibFakeTime() = %q, %v; want a path to libfaketime.so.1", p, err)
	}
}
