package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// secretWriter writes acquire's --secret-file: to a temporary file of
// mode 0600 in the same directory, renamed to the file once written, so
// that the secret is never readable by others, nor the file half written.
type secretWriter struct {
	path string // absolute, as renew and release may run elsewhere
	tmp  *os.File
}

func newSecretWriter(file string) (*secretWriter, error) {
	path, err := filepath.Abs(file)
	if err != nil {
		return nil, usageErrorf("--secret-file %s: %v", file, err)
	}
	// The rename that puts the file in place would fail on a directory
	// only once the lock is taken, and would replace a device or a
	// pipe, /dev/null say, with a regular file.
	switch fi, err := os.Lstat(path); {
	case err == nil && fi.IsDir():
		return nil, usageErrorf("--secret-file %s: is a directory: give the name of a file to write", file)
	case err == nil && !fi.Mode().IsRegular():
		return nil, usageErrorf("--secret-file %s: is not a regular file but %s: give the name of a file to write", file, fileKind(fi.Mode()))
	case strings.HasSuffix(file, string(filepath.Separator)):
		return nil, usageErrorf("--secret-file %s: names a directory (it ends with %c): give the name of a file to write", file, filepath.Separator)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".fencelock-secret-*")
	if err != nil {
		return nil, usageErrorf("--secret-file %s: cannot create a file there: %v", file, err)
	}
	return &secretWriter{path: path, tmp: tmp}, nil
}

// fileKind words what a file that is not regular is.
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

func (w *secretWriter) write(secret string) error {
	_, err := w.tmp.WriteString(secret + "\n")
	err = errors.Join(err, w.tmp.Sync(), w.tmp.Close())
	if err == nil {
		err = os.Rename(w.tmp.Name(), w.path)
	}
	if err != nil {
		return fmt.Errorf("--secret-file %s: %w", w.path, err)
	}
	w.tmp = nil
	return nil
}

// abandon removes the temporary file unless write renamed it.
func (w *secretWriter) abandon() {
	if w.tmp != nil {
		w.tmp.Close()
		os.Remove(w.tmp.Name())
	}
}

// readSecretFile reads a secret written by acquire --secret-file.
func readSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<12))
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return "", errors.New("want the secret alone, as acquire --secret-file writes it")
	}
	return s, nil
}
