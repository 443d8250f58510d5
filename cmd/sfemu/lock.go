package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// dataDirLock is the file `sfemu run` holds an exclusive flock on while it
// uses a data dir: a second sfemu on the same dir fails at once, before it
// removes (--fresh) or opens anything.
const dataDirLock = "sfemu.lock"

func lockDataDir(dir string) (unlock func(), err error) {
	p := filepath.Join(dir, dataDirLock)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data dir %s is in use by another sfemu (%s is locked)", dir, p)
		}
		return nil, fmt.Errorf("data dir %s: lock %s: %w", dir, p, err)
	}
	return func() { _ = f.Close() }, nil
}
