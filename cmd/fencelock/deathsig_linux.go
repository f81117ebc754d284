package main

import "syscall"

// setDeathSignal makes the kernel kill the process if fencelock dies
// without stopping it (SIGKILL, a crash), so no server is left behind.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
