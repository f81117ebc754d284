//go:build !linux

package main

import (
	"os"
	"syscall"
)

// setDeathSignal has no equivalent outside Linux. What still holds there:
// run's guard kills COMMAND when fencelock dies (it sees its control pipe
// close, which is portable), but a guard killed with SIGKILL leaves
// COMMAND running, and a fencelock killed with SIGKILL leaves its demo
// server running.
func setDeathSignal(*syscall.SysProcAttr) {}

// selfExe is the path that re-executes this program.
func selfExe() string {
	if p, err := os.Executable(); err == nil {
		return p
	}
	return os.Args[0]
}
