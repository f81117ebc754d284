package main

import (
	"github.com/fencelock/fencelock"
)

// oneName checks that the positional arguments are exactly one NAME, a
// valid lock name.
func oneName(pos []string, dashes bool) error {
	switch {
	case len(pos) == 0:
		return usageErrorf("missing lock NAME")
	case len(pos) > 1 || dashes:
		return usageErrorf("want exactly one NAME")
	}
	return validName(pos[0])
}

// validName checks the library's rule for lock names before anything is
// sent, and words it plainly.
func validName(name string) error {
	if fencelock.CheckName(name) == nil {
		return nil
	}
	if name == "" || len(name) > fencelock.MaxNameLen {
		return usageErrorf("lock name has %d characters: use 1 to %d letters, digits, spaces or punctuation (printable ASCII), but no { or }", len(name), fencelock.MaxNameLen)
	}
	return usageErrorf("lock name %q: use only letters, digits, spaces and punctuation (printable ASCII), but no { or } (which would break its Redis Cluster hash tag)", name)
}
