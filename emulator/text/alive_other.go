//go:build !unix

package text

// processAlive cannot tell on this platform: every owner counts as alive,
// so orphaned scratch directories are left in place.
func processAlive(pid int) bool { return true }
