package main

import "syscall"

// setDeathSignal makes the kernel send SIGKILL to the process when its
// parent dies without stopping it (SIGKILL, a crash), so nothing is left
// behind: COMMAND of a dead guard, the demo's redis-server. The signal
// comes when the thread that started the process exits, not the whole
// parent: start it from a goroutine that is locked to its thread
// (runtime.LockOSThread) for as long as the process runs, as the guard
// does.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// selfExe is the path that re-executes this program, even if its file was
// replaced or removed since it started (an upgrade while run runs).
func selfExe() string { return "/proc/self/exe" }
