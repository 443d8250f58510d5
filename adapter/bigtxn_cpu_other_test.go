//go:build !linux

package adapter

// threadCPUSeconds is unknown off Linux: the benchmark then charges the
// upstream's transaction calls to the pipeline.
func threadCPUSeconds() float64 { return 0 }
