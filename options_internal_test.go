package fencelock

import (
	"errors"
	"strings"
	"testing"
)

// Lock names come from callers and, through the CLI, from argv: checkName
// accepts exactly the names whose keys share one hash tag and that the
// fence text form can carry.
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"orders:42", "", "a{b}", "tab\t", "naïve", strings.Repeat("x", MaxNameLen+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := checkName(name)
		valid := len(name) >= 1 && len(name) <= MaxNameLen && !strings.ContainsAny(name, "{}")
		for i := 0; i < len(name); i++ {
			if name[i] < 0x20 || name[i] > 0x7e {
				valid = false
			}
		}
		if valid != (err == nil) {
			t.Fatalf("checkName(%q) = %v, want valid=%v", name, err, valid)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("checkName(%q) = %v, want ErrInvalid", name, err)
		}
	})
}
