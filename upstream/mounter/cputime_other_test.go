//go:build !linux

package mounter

func threadCPUNanos() int64 { return -1 }
