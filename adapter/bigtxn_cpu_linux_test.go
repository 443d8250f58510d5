package adapter

import (
	"syscall"
	"time"
)

// threadCPUSeconds is the calling thread's user + system CPU time
// (RUSAGE_THREAD): the caller must be locked to its thread.
func threadCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
