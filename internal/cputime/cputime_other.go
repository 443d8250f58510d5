//go:build !unix

// Package cputime reads the CPU time the process has used, for benchmarks
// that report CPU per row or per vector.
package cputime

import "time"

// Process is 0 where getrusage is not available.
func Process() time.Duration { return 0 }
