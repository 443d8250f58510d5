// Package datadir owns the layout of an sfemu data dir: the lock one
// process holds on it, the marker binding it to the upstream its state
// came from, the state a fresh start removes, and the service GC safe
// point id derived from it. Its errors name the `sfemu run` flag that
// resolves them, since that is who meets them.
package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// LockFile is the file `sfemu run` holds an exclusive flock on while it
// uses a data dir: a second sfemu on the same dir fails at once, before it
// removes (--fresh) or opens anything.
const LockFile = "sfemu.lock"

// Lock takes the data dir's lock; unlock releases it (closing the file,
// as the process's exit does).
func Lock(dir string) (unlock func(), err error) {
	p := filepath.Join(dir, LockFile)
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
