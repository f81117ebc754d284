// Package sfinterop holds no code, only tests: they check the text form of
// fence.Fence (the Fencing-Token header) against an independent
// implementation of RFC 9651 structured fields, github.com/dunglas/httpsfv,
// in both directions, and fuzz the two parsers against each other.
//
// It is a module of its own so that httpsfv, needed only by these tests,
// never enters the library's go.mod. httpsfv was chosen because it is a
// complete RFC 9651 implementation in Go, without dependencies, that
// passes the HTTP working group's structured-field test suite, and was
// written by others, so it shares none of fence.Parse's assumptions.
package sfinterop
