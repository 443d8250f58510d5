//go:build linux

package cputime

import (
	"syscall"
	"time"
)

// Thread is the CPU time (user + system) the calling OS thread has used
// (RUSAGE_THREAD); 0 when it cannot be read. The caller locks its goroutine
// to its thread (runtime.LockOSThread) for the figure to mean anything.
func Thread() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
