//go:build unix

package vector

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) the process has used: the
// graph builder runs on its own goroutine, so a benchmark's cost per vector
// is process CPU, not the calling goroutine's wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
