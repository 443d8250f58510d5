//go:build !linux

package cputime

import "time"

// Thread is 0 where a per-thread CPU time is not available.
func Thread() time.Duration { return 0 }
