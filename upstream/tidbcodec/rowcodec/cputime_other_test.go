//go:build !linux

package rowcodec

func threadCPUNanos() int64 { return -1 }
