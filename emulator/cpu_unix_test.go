//go:build unix

package emulator

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) the process has used, so a
// benchmark can report CPU per row, which a loaded machine distorts less
// than wall-clock rows/s.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
