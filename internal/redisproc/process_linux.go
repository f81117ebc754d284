package redisproc

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// startProcess starts cmd so that it is killed when the program that
// started it dies, however it dies (a panic, a test timeout's os.Exit,
// SIGKILL after a hang): no redis-server outlives its parent.
//
// Linux sends the parent-death signal (PR_SET_PDEATHSIG) when the thread
// that forked the child exits, not the process. The Go runtime ends a
// thread when a goroutine locked to it returns without unlocking, and any
// goroutine may run on any thread; a server forked from an ordinary
// goroutine could be killed while in use because unrelated code locked and
// left that thread. So every fork happens on one goroutine locked to its
// thread for the life of the process: that thread exits only with the
// process.
func startProcess(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	forkerOnce.Do(func() { go forker() })
	done := make(chan error, 1)
	forks <- fork{cmd, done}
	return <-done
}

type fork struct {
	cmd  *exec.Cmd
	done chan<- error
}

var (
	forkerOnce sync.Once
	forks      = make(chan fork)
)

// forker starts every process, on a thread it never unlocks or leaves.
func forker() {
	runtime.LockOSThread()
	for f := range forks {
		f.done <- f.cmd.Start()
	}
}
