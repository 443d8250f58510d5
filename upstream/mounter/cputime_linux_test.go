//go:build linux

package mounter

import "github.com/searchfabric/sfemu/internal/cputime"

// threadCPUNanos is the CPU time the calling OS thread has used. The
// benchmarks lock their goroutine to a thread and report it as cpu-ns/op:
// on a machine shared with other jobs it stays close to the unloaded cost
// while wall-clock ns/op grows with the load.
func threadCPUNanos() int64 { return int64(cputime.Thread()) }
