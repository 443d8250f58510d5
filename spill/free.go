package spill

import (
	"fmt"
	"syscall"
)

// Reserve is the free space the default spill quota leaves on the disk
// (RS5): spilling must not fill the disk the emulator writes to.
const Reserve = 1 << 30

// DefaultQuota is the spill quota when none is configured: the free space
// of the file system holding path, minus Reserve (at least 1 byte, so a
// nearly full disk refuses spills instead of disabling the quota).
func DefaultQuota(path string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("spill: free space of %s: %w", path, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	return max(free-Reserve, 1), nil
}
