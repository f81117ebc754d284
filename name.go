package fencelock

// CheckName reports whether name can be the name of a lock (or of an
// election): 1 to MaxNameLen bytes of printable ASCII, without braces. It
// is the check that every call of a Client makes before it sends
// anything; the error wraps ErrInvalid. A program that takes names from
// outside (a command line, a request) can use it to reject a bad one
// before it connects.
func CheckName(name string) error { return checkName(name) }
