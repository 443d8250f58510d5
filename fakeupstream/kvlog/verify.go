package kvlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Verify checks the log in dir offline and changes nothing (DUR-10): every
// frame's length and checksum and every record's decoding, as Open's
// replay does, except that a torn tail is reported in Stats.TornBytes
// (the next Open drops it: it was never acknowledged) instead of being
// truncated. A damaged record that is not the tail is a *CorruptError
// naming the file and offset. A log held by a running cluster is refused
// (its lock is taken); a missing log is an error wrapping os.ErrNotExist.
func Verify(dir string) (Stats, error) {
	var st Stats
	path := filepath.Join(dir, FileName)
	f, err := os.Open(path)
	if err != nil {
		return st, fmt.Errorf("kvlog: verify: %w", err)
	}
	defer f.Close()
	if lockf, err := os.Open(filepath.Join(dir, LockName)); err == nil {
		defer lockf.Close()
		if err := syscall.Flock(int(lockf.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return st, fmt.Errorf("%w: %s is locked by a running cluster (stop it first)", ErrLocked, lockf.Name())
			}
			return st, fmt.Errorf("kvlog: verify: lock %s: %w", lockf.Name(), err)
		}
	}
	l := &Log{path: path, f: f, readOnly: true}
	end, err := l.replay(func(int64, Record) error { return nil }, &st)
	st.Size = end
	return st, err
}
