//go:build unix

// Package cputime reads the CPU time the process has used, for benchmarks
// that report CPU per row or per vector: on a loaded machine that is less
// distorted than wall-clock rates, and it counts background goroutines.
package cputime

import (
	"syscall"
	"time"
)

// Process is the CPU time (user + system) the process has used; 0 when it
// cannot be read.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
