package mvcc

import "fmt"

// RestoreError: a replayed step does not fit the state rebuilt so far (a
// log that was not written by this store, or a bug). Where names the
// position in the log.
type RestoreError struct {
	Key  []byte
	What string
}

func (e *RestoreError) Error() string {
	return fmt.Sprintf("mvcc: restore key %x: %s", e.Key, e.What)
}

// The Restore methods replay Journal steps into a store being rebuilt.
// They report nothing to the observer or the journal; call them before
// SetObserver/SetJournal.

// RestoreLock replays Journal.PutLock. The lock is copied.
func (s *Store) RestoreLock(l Lock) error {
	if l.StartTs == 0 {
		return &RestoreError{Key: l.Key, What: "lock with start_ts 0"}
	}
	if l.Op < OpPut || l.Op > OpLock {
		return &RestoreError{Key: l.Key, What: fmt.Sprintf("lock with bad op %d", l.Op)}
	}
	e := s.getOrCreate(l.Key)
	if e.lock != nil {
		if e.lock.hdr.startTs == l.StartTs {
			return nil
		}
		return &RestoreError{Key: l.Key, What: fmt.Sprintf("lock of txn %d over the lock of txn %d", l.StartTs, e.lock.hdr.startTs)}
	}
	s.setLock(e, s.headerOf(&l), l.Op, append([]byte(nil), l.Value...))
	return nil
}

// RestoreWrite replays Journal.AddWrite. The value is copied.
func (s *Store) RestoreWrite(key []byte, w Write, unlock bool) error {
	if w.Kind < WritePut || w.Kind > WriteRollback {
		return &RestoreError{Key: key, What: fmt.Sprintf("write record with bad kind %d", w.Kind)}
	}
	if w.CommitTs < w.StartTs || (w.Kind != WriteRollback && w.CommitTs == w.StartTs) || w.StartTs == 0 {
		return &RestoreError{Key: key, What: fmt.Sprintf("%s record with start_ts %d, commit_ts %d", w.Kind, w.StartTs, w.CommitTs)}
	}
	e := s.getOrCreate(key)
	if unlock {
		if err := s.dropLock(e, w.StartTs); err != nil {
			return err
		}
	}
	if w.Value != nil {
		w.Value = append([]byte(nil), w.Value...)
	}
	e.addWrite(w)
	return nil
}

// RestoreDelLock replays Journal.DelLock.
func (s *Store) RestoreDelLock(key []byte, startTs uint64) error {
	e := s.get(key)
	if e == nil {
		return &RestoreError{Key: key, What: fmt.Sprintf("unlock of txn %d: key unknown", startTs)}
	}
	return s.dropLock(e, startTs)
}

func (s *Store) dropLock(e *entry, startTs uint64) error {
	if !e.lockedBy(startTs) {
		return &RestoreError{Key: e.key, What: fmt.Sprintf("unlock of txn %d: no such lock", startTs)}
	}
	s.clearLock(e)
	return nil
}

// Snapshot replays the whole state into j, key by key (write records in
// commit order, then the lock), after a GC step carrying the safe point.
// A persistence layer uses it to compact its log.
func (s *Store) Snapshot(j Journal) {
	if s.safePoint > 0 {
		j.GC(s.safePoint)
	}
	s.tree.Ascend(func(e *entry) bool {
		for i := range e.writes {
			j.AddWrite(e.key, e.writes[i], false)
		}
		if e.lock != nil {
			s.journalLock(j, e)
		}
		return true
	})
}

// MaxTs is the greatest timestamp the store holds (start, commit and min
// commit ts of records and locks, and the safe point); a reopened cluster's
// TSO starts above it.
func (s *Store) MaxTs() uint64 {
	m := s.safePoint
	s.tree.Ascend(func(e *entry) bool {
		for i := range e.writes {
			m = max(m, e.writes[i].CommitTs, e.writes[i].StartTs)
		}
		if e.lock != nil {
			m = max(m, e.lock.hdr.startTs, e.lock.hdr.minCommitTs)
		}
		return true
	})
	return m
}
