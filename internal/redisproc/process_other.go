//go:build !linux

package redisproc

import "os/exec"

// startProcess starts cmd. Only Linux has a parent-death signal:
// elsewhere a server outlives a parent that dies without stopping it.
func startProcess(cmd *exec.Cmd) error { return cmd.Start() }
