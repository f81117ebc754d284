//go:build !linux

package redistest

import "os/exec"

// startProcess starts cmd. Only Linux has a parent-death signal: elsewhere
// a server outlives a test binary that dies without its cleanup.
func startProcess(cmd *exec.Cmd) error { return cmd.Start() }
