package redistest

import (
	"syscall"
	"testing"
)

// A server whose port another server holds is not ready on the other's
// answers: it fails to bind, and start reports that, so that launch tries
// another port.
func TestServer_portTaken(t *testing.T) {
	t.Parallel()
	a := New(t)
	b := &Server{dir: t.TempDir(), log: &syncBuffer{}, port: a.Port()}
	if err := b.start(); err == nil {
		b.stop(syscall.SIGKILL)
		t.Fatalf("start on %s, which another server holds, reported ready", a.Addr())
	}
}
