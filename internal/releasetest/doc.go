// Package releasetest proves a release installable without the internet:
// its test tags a clone with scripts/release, serves the tagged modules
// from a file-based module proxy, and installs and imports them in a
// fresh module cache (docs/operations.md, "Installation and versioning").
//
// It is a module of its own so that golang.org/x/mod, which makes the
// proxy's zip files as a real proxy does, stays out of the library's
// go.mod. It is not published.
package releasetest
