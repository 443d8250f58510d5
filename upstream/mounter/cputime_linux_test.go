//go:build linux

package mounter

import "syscall"

// threadCPUNanos is the CPU time the calling OS thread has used. The
// benchmarks lock their goroutine to a thread and report it as cpu-ns/op:
// on a machine shared with other jobs it stays close to the unloaded cost
// while wall-clock ns/op grows with the load.
func threadCPUNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return -1
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
