//go:build !linux

package main

import "syscall"

// setDeathSignal has no equivalent outside Linux: a fencelock killed with
// SIGKILL leaves its demo server running there.
func setDeathSignal(*syscall.SysProcAttr) {}
