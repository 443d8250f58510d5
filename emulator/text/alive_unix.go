//go:build unix

package text

import (
	"errors"
	"syscall"
)

// processAlive reports whether a process with this pid exists (EPERM: it
// exists but belongs to another user).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
