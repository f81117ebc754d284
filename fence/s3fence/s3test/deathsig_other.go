//go:build !linux

package s3test

import "os/exec"

// setDeathSignal does nothing: only Linux has a parent-death signal, so
// elsewhere a server outlives a test binary that dies without stopping it.
func setDeathSignal(*exec.Cmd) {}
