package storage

// CheckFile runs E63's checks (meta pages, size against the high-water
// mark, the page tree read from the file, not mapped) on any bbolt file
// before it is opened. The schema store uses it (SS58): bbolt's own check
// walks the pages on a goroutine of its own, where a fault or panic on a
// damaged page cannot be recovered. nil for a missing or empty file.
func CheckFile(path string) error { return precheck(path) }

// ErrDamaged marks CheckFile's refusals of a damaged file, as opposed to a
// failure to read it.
var ErrDamaged = errDamaged
