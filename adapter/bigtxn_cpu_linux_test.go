package adapter

import "github.com/searchfabric/sfemu/internal/cputime"

// threadCPUSeconds is the calling thread's user + system CPU time
// (RUSAGE_THREAD): the caller must be locked to its thread.
func threadCPUSeconds() float64 { return cputime.Thread().Seconds() }
