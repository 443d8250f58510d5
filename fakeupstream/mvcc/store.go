package mvcc

import (
	"bytes"
	"sort"
	"unsafe"

	"github.com/google/btree"

	"github.com/searchfabric/sfemu/fakeupstream/tso"
)

// entry holds everything known about one key.
type entry struct {
	key    []byte
	lock   *keyLock
	writes []Write // ascending CommitTs
	// lockOp is the lock's op (set with lock).
	lockOp Op
}

func lessEntry(a, b *entry) bool { return bytes.Compare(a.key, b.key) < 0 }

// Store is the multi-version key space.
type Store struct {
	// tree orders the keys for scans; byKey finds one key in constant
	// time, so a point read or write costs the same in a table of 10k or
	// 1M rows (a btree descent over a million entries misses the cache at
	// every level). Both hold the same entries.
	tree      *btree.BTreeG[*entry]
	byKey     map[string]*entry
	nlocks    int
	safePoint uint64
	obs       Observer
	// j records every state change for persistence (nil: in memory only,
	// and the hot paths pay one nil check).
	j Journal
	// found holds the entries a request's first pass looked up, so its
	// second pass does not look them up again (a lookup of a long key in
	// a map of millions misses the cache several times). Reused across
	// requests; the store is used under one lock.
	found []*entry
	// jlock is the Lock handed to the journal (journalLock); restoreHdr
	// is the header the last restored lock got (headerOf).
	jlock      Lock
	restoreHdr *lockHeader
}

// foundKeep is the largest found slice kept for the next request.
const foundKeep = 1024

// releaseFound drops the entries a request looked up.
func (s *Store) releaseFound() {
	clear(s.found)
	if cap(s.found) > foundKeep {
		s.found = nil
		return
	}
	s.found = s.found[:0]
}

// Journal receives every change of the store's state, in apply order, so a
// persistence layer can log it and replay it with the Restore methods. The
// slices passed belong to the store and must be copied (encoded) before
// the call returns.
type Journal interface {
	// PutLock: a lock was written.
	PutLock(l *Lock)
	// AddWrite: a write record was added to key; unlock tells that the
	// lock of w.StartTs on key was removed by the same step (commit,
	// rollback of a locked key).
	AddWrite(key []byte, w Write, unlock bool)
	// DelLock: the lock of startTs on key was removed without a new record.
	DelLock(key []byte, startTs uint64)
	// GC: the safe point was raised to sp (replaying GC(sp) at this point
	// of the sequence reproduces the same state).
	GC(sp uint64)
}

// SetJournal installs the persistence journal (nil: none).
func (s *Store) SetJournal(j Journal) { s.j = j }

// New returns an empty store. obs may be nil.
func New(obs Observer) *Store {
	return &Store{tree: btree.NewG[*entry](32, lessEntry), byKey: map[string]*entry{}, obs: obs}
}

// keyString views an entry's key as a map key without a copy: an entry's
// key is allocated once and never written, so the string stays valid.
func keyString(k []byte) string { return unsafe.String(unsafe.SliceData(k), len(k)) }

// SetObserver replaces the change observer.
func (s *Store) SetObserver(obs Observer) { s.obs = obs }

func (s *Store) get(key []byte) *entry { return s.byKey[string(key)] }

// getOrAdopt is getOrCreate keeping key itself for a new entry (the
// caller handed it over: PrewriteOptions.Handoff).
func (s *Store) getOrAdopt(key []byte) *entry {
	if e := s.get(key); e != nil {
		return e
	}
	e := &entry{key: key}
	s.tree.ReplaceOrInsert(e)
	s.byKey[keyString(e.key)] = e
	return e
}

func (s *Store) getOrCreate(key []byte) *entry {
	if e := s.get(key); e != nil {
		return e
	}
	e := &entry{key: append([]byte(nil), key...)}
	s.tree.ReplaceOrInsert(e)
	s.byKey[keyString(e.key)] = e
	return e
}

// remove drops an entry that holds nothing any more.
func (s *Store) remove(e *entry) {
	s.tree.Delete(e)
	delete(s.byKey, keyString(e.key))
}

// latestData returns the newest Put/Delete record with CommitTs <= ts.
func (e *entry) latestData(ts uint64) *Write {
	for i := len(e.writes) - 1; i >= 0; i-- {
		w := &e.writes[i]
		if w.CommitTs <= ts && w.isData() {
			return w
		}
	}
	return nil
}

// valueAt is the value visible at ts (nil: absent or deleted).
func (e *entry) valueAt(ts uint64) []byte {
	if w := e.latestData(ts); w != nil && w.Kind == WritePut {
		return w.Value
	}
	return nil
}

// recordOf returns the write record of txn startTs (any kind), if present.
func (e *entry) recordOf(startTs uint64) *Write {
	for i := len(e.writes) - 1; i >= 0; i-- {
		if e.writes[i].StartTs == startTs {
			return &e.writes[i]
		}
	}
	return nil
}

func (e *entry) addWrite(w Write) {
	n := len(e.writes)
	if n == 0 || e.writes[n-1].CommitTs <= w.CommitTs {
		e.writes = append(e.writes, w)
		return
	}
	i := sort.Search(n, func(i int) bool { return e.writes[i].CommitTs > w.CommitTs })
	e.writes = append(e.writes, Write{})
	copy(e.writes[i+1:], e.writes[i:])
	e.writes[i] = w
}

func (s *Store) emit(c Change) {
	if s.obs != nil && c.Op != OpLock {
		s.obs(c)
	}
}

// blocking reports whether lock l blocks a snapshot read at ts, following
// TiKV: only locks with start_ts <= ts that change data block, and an
// async-commit/1PC lock whose min_commit_ts is above ts cannot commit at or
// below ts, so it does not block.
func blocking(e *entry, ts uint64) bool {
	if e.lock == nil || e.lockOp == OpLock {
		return false
	}
	h := e.lock.hdr
	return h.startTs <= ts && h.minCommitTs <= ts
}

func (s *Store) checkRead(ts uint64) error {
	if ts < s.safePoint {
		return &GCTooEarlyError{ReadTs: ts, SafePoint: s.safePoint}
	}
	return nil
}

// Get returns the committed value of key visible at ts (nil if absent), or
// a *LockedError if a lock blocks the read, or a *GCTooEarlyError.
func (s *Store) Get(key []byte, ts uint64) ([]byte, error) {
	if err := s.checkRead(ts); err != nil {
		return nil, err
	}
	e := s.get(key)
	if e == nil {
		return nil, nil
	}
	if blocking(e, ts) {
		return nil, &LockedError{Lock: e.lockView(), ReadTs: ts}
	}
	return e.valueAt(ts), nil
}

// KV is one key/value pair of a scan.
type KV struct {
	Key   []byte
	Value []byte
}

// Scan returns up to limit (<= 0: no limit) visible pairs in [start, end)
// (nil end = +inf) at ts, in key order. A blocking lock inside the range
// fails the scan with a *LockedError, as TiKV's scanner does.
func (s *Store) Scan(start, end []byte, ts uint64, limit int) ([]KV, error) {
	if err := s.checkRead(ts); err != nil {
		return nil, err
	}
	var out []KV
	var err error
	s.ascend(start, end, func(e *entry) bool {
		if blocking(e, ts) {
			err = &LockedError{Lock: e.lockView(), ReadTs: ts}
			return false
		}
		if v := e.valueAt(ts); v != nil {
			out = append(out, KV{Key: e.key, Value: v})
		}
		return limit <= 0 || len(out) < limit
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Store) ascend(start, end []byte, fn func(*entry) bool) {
	pivot := &entry{key: start}
	s.tree.AscendGreaterOrEqual(pivot, func(e *entry) bool {
		if end != nil && bytes.Compare(e.key, end) >= 0 {
			return false
		}
		return fn(e)
	})
}

// PrewriteOptions describe the transaction a prewrite belongs to.
type PrewriteOptions struct {
	Primary []byte
	StartTs uint64
	TTL     uint64
	// AsyncCommit marks the locks as async-commit locks; Secondaries is
	// then recorded on the primary's lock and MinCommitTs on every lock.
	AsyncCommit bool
	Secondaries [][]byte
	MinCommitTs uint64
	// Handoff gives the mutations' keys and values to the store: it keeps
	// them without a copy, and the caller never writes to them again. A
	// large transaction's buffer then becomes the store's data instead of
	// being held twice until the commit (MVCC-11).
	Handoff bool
}

// Prewrite locks every mutation's key for txn opts.StartTs, all or
// nothing. Re-prewriting a key already locked by the same txn is a no-op.
// It fails with *LockedError (another txn's lock), *WriteConflictError (a
// newer commit) or *TxnRolledBackError (this txn was rolled back).
func (s *Store) Prewrite(muts []Mutation, opts PrewriteOptions) error {
	if opts.StartTs == 0 {
		return &BadTimestampError{What: "prewrite with start_ts 0"}
	}
	if err := s.checkConflicts(muts, opts.StartTs); err != nil {
		return err
	}
	defer s.releaseFound()
	// One header for all the locks of this request (MVCC-12).
	h := newHeader(&opts)
	for i := range muts {
		s.lockOne(s.found[i], h, &muts[i], &opts)
	}
	return nil
}

// lockOne writes txn opts.StartTs's lock of m on e (nil: create the
// entry) under header h, unless the txn already holds it, and returns the
// entry.
func (s *Store) lockOne(e *entry, h *lockHeader, m *Mutation, opts *PrewriteOptions) *entry {
	switch {
	case e != nil:
	case opts.Handoff:
		e = s.getOrAdopt(m.Key)
	default:
		e = s.getOrCreate(m.Key)
	}
	if e.lock != nil { // same txn, checked before
		return e
	}
	value := m.Value
	if !opts.Handoff {
		value = append([]byte(nil), m.Value...)
	}
	if bytes.Equal(m.Key, opts.Primary) {
		h.setSecondaries(opts)
	}
	s.setLock(e, h, m.Op, value)
	if s.j != nil {
		s.journalLock(s.j, e)
	}
	s.emit(Change{Kind: ChangePrewrite, Op: m.Op, Key: e.key, StartTs: opts.StartTs, Value: value, OldValue: e.valueAt(^uint64(0))})
	return e
}

// checkConflicts checks muts against the store and leaves the entry of
// each (nil: none yet) in s.found, index for index; on an error it
// releases them.
func (s *Store) checkConflicts(muts []Mutation, startTs uint64) error {
	s.found = s.found[:0]
	for _, m := range muts {
		e := s.get(m.Key)
		s.found = append(s.found, e)
		if e == nil {
			continue
		}
		if err := conflictOf(e, startTs); err != nil {
			s.releaseFound()
			return err
		}
	}
	return nil
}

// conflictOf is what keeps txn startTs from writing e's key: another
// txn's lock, its own rollback, or a newer commit.
func conflictOf(e *entry, startTs uint64) error {
	if e.lock != nil && e.lock.hdr.startTs != startTs {
		return &LockedError{Lock: e.lockView(), ReadTs: startTs}
	}
	if r := e.recordOf(startTs); r != nil && r.Kind == WriteRollback {
		return &TxnRolledBackError{Key: e.key, StartTs: startTs}
	}
	for i := len(e.writes) - 1; i >= 0; i-- {
		w := &e.writes[i]
		if w.CommitTs <= startTs {
			break
		}
		if w.Kind != WriteRollback {
			return &WriteConflictError{Key: e.key, StartTs: startTs, ConflictStartTs: w.StartTs, ConflictCommitTs: w.CommitTs}
		}
	}
	return nil
}

// OnePC commits muts at commitTs without locks, all or nothing; the CDC
// feed sees COMMITTED rows. Conflict rules are those of Prewrite.
func (s *Store) OnePC(muts []Mutation, startTs, commitTs uint64) error {
	if startTs == 0 || commitTs <= startTs {
		return &BadTimestampError{What: "1PC needs 0 < start_ts < commit_ts"}
	}
	if err := s.checkConflicts(muts, startTs); err != nil {
		return err
	}
	defer s.releaseFound()
	for i, m := range muts {
		e := s.found[i]
		if e == nil {
			e = s.getOrCreate(m.Key)
		}
		old := e.valueAt(^uint64(0))
		w := Write{StartTs: startTs, CommitTs: commitTs}
		switch m.Op {
		case OpPut:
			w.Kind, w.Value = WritePut, append([]byte(nil), m.Value...)
		case OpDel:
			w.Kind = WriteDelete
		default:
			w.Kind = WriteLock
		}
		e.addWrite(w)
		if s.j != nil {
			s.j.AddWrite(e.key, w, false)
		}
		s.emit(Change{Kind: ChangeCommitted, Op: m.Op, Key: e.key, StartTs: startTs, CommitTs: commitTs, Value: w.Value, OldValue: old})
	}
	return nil
}

// Commit turns txn startTs's locks on keys into write records at commitTs,
// all or nothing. Committing an already committed key is a no-op.
func (s *Store) Commit(keys [][]byte, startTs, commitTs uint64) error {
	if commitTs <= startTs {
		return &BadTimestampError{What: "commit_ts must be greater than start_ts"}
	}
	s.found = s.found[:0]
	defer s.releaseFound()
	for _, k := range keys {
		e := s.get(k)
		s.found = append(s.found, e)
		if e != nil && e.lockedBy(startTs) {
			if mc := e.lock.hdr.minCommitTs; commitTs < mc {
				return &CommitTsExpiredError{Key: e.key, StartTs: startTs, CommitTs: commitTs, MinCommitTs: mc}
			}
			continue
		}
		var r *Write
		if e != nil {
			r = e.recordOf(startTs)
		}
		switch {
		case r == nil:
			return &LockNotFoundError{Key: k, StartTs: startTs}
		case r.Kind == WriteRollback:
			return &TxnRolledBackError{Key: k, StartTs: startTs}
		}
	}
	for _, e := range s.found {
		if !e.lockedBy(startTs) {
			continue // already committed
		}
		s.commitLock(e, commitTs)
	}
	return nil
}

func (s *Store) commitLock(e *entry, commitTs uint64) {
	op, startTs := e.lockOp, e.lock.hdr.startTs
	w := Write{StartTs: startTs, CommitTs: commitTs}
	switch op {
	case OpPut:
		w.Kind, w.Value = WritePut, e.lock.value
	case OpDel:
		w.Kind = WriteDelete
	default:
		w.Kind = WriteLock
	}
	s.clearLock(e)
	e.addWrite(w)
	if s.j != nil {
		s.j.AddWrite(e.key, w, true)
	}
	s.emit(Change{Kind: ChangeCommit, Op: op, Key: e.key, StartTs: startTs, CommitTs: commitTs})
}

// Rollback removes txn startTs's locks on keys and leaves rollback records
// so a late prewrite of the same txn fails. It fails with
// *TxnCommittedError if the txn already committed a key.
func (s *Store) Rollback(keys [][]byte, startTs uint64) error {
	for _, k := range keys {
		if e := s.get(k); e != nil && !e.lockedBy(startTs) {
			if r := e.recordOf(startTs); r != nil && r.Kind != WriteRollback {
				return &TxnCommittedError{Key: e.key, StartTs: startTs, CommitTs: r.CommitTs}
			}
		}
	}
	for _, k := range keys {
		s.rollbackKey(s.getOrCreate(k), startTs)
	}
	return nil
}

func (s *Store) rollbackKey(e *entry, startTs uint64) {
	unlocked := false
	if e.lockedBy(startTs) {
		op := e.lockOp
		s.clearLock(e)
		unlocked = true
		s.emit(Change{Kind: ChangeRollback, Op: op, Key: e.key, StartTs: startTs})
	}
	if e.recordOf(startTs) == nil {
		w := Write{Kind: WriteRollback, StartTs: startTs, CommitTs: startTs}
		e.addWrite(w)
		if s.j != nil {
			s.j.AddWrite(e.key, w, unlocked)
		}
	} else if unlocked && s.j != nil {
		s.j.DelLock(e.key, startTs)
	}
}

// LockOf returns a copy of the lock on key, if any.
func (s *Store) LockOf(key []byte) (Lock, bool) {
	if e := s.get(key); e != nil && e.lock != nil {
		return e.lockView(), true
	}
	return Lock{}, false
}

// NumLocks is the number of locks in the store.
func (s *Store) NumLocks() int { return s.nlocks }

// ScanLocks returns up to limit (<= 0: all) locks with start_ts <=
// maxVersion in [start, end) (nil end = +inf), in key order.
func (s *Store) ScanLocks(start, end []byte, maxVersion uint64, limit int) []Lock {
	var out []Lock
	if s.nlocks == 0 {
		return nil
	}
	s.ascend(start, end, func(e *entry) bool {
		if e.lock != nil && e.lock.hdr.startTs <= maxVersion {
			out = append(out, e.lockView())
		}
		return limit <= 0 || len(out) < limit
	})
	return out
}

// MinLockTs returns the smallest start_ts of data locks in [start, end)
// and whether any exists. The resolved-ts computation uses it.
func (s *Store) MinLockTs(start, end []byte) (uint64, bool) {
	if s.nlocks == 0 {
		return 0, false
	}
	min, found := uint64(0), false
	s.ascend(start, end, func(e *entry) bool {
		if e.lock != nil && e.lockOp != OpLock && (!found || e.lock.hdr.startTs < min) {
			min, found = e.lock.hdr.startTs, true
		}
		return true
	})
	return min, found
}

// Version is one committed data change for the CDC incremental scan.
type Version struct {
	Key      []byte
	Op       Op
	StartTs  uint64
	CommitTs uint64
	Value    []byte
	OldValue []byte
}

// ScanVersions returns, in key order and per key in commit order, every
// Put/Delete record in [start, end) with after < commit_ts <= upto, with
// the value it replaced. This is TiKV's incremental scan of the write CF.
// The result is allocated once at its exact size (a counting pass first),
// so a large scan does not regrow its slice.
func (s *Store) ScanVersions(start, end []byte, after, upto uint64) []Version {
	n := s.CountVersions(start, end, after, upto)
	if n == 0 {
		return nil
	}
	return s.AppendVersions(make([]Version, 0, n), start, end, after, upto)
}

// CountVersions is the number of records ScanVersions would return.
func (s *Store) CountVersions(start, end []byte, after, upto uint64) int {
	n := 0
	s.ascend(start, end, func(e *entry) bool {
		for i := range e.writes {
			if w := &e.writes[i]; w.isData() && w.CommitTs > after && w.CommitTs <= upto {
				n++
			}
		}
		return true
	})
	return n
}

// AppendVersions is ScanVersions appending to dst (a caller's reused or
// presized buffer) and returning the extended slice.
func (s *Store) AppendVersions(dst []Version, start, end []byte, after, upto uint64) []Version {
	s.ascend(start, end, func(e *entry) bool {
		var prev []byte
		for i := range e.writes {
			w := &e.writes[i]
			if !w.isData() {
				continue
			}
			if w.CommitTs > after && w.CommitTs <= upto {
				v := Version{Key: e.key, StartTs: w.StartTs, CommitTs: w.CommitTs, Value: w.Value, OldValue: prev}
				v.Op = OpPut
				if w.Kind == WriteDelete {
					v.Op = OpDel
				}
				dst = append(dst, v)
			}
			prev = nil
			if w.Kind == WritePut {
				prev = w.Value
			}
		}
		return true
	})
	return dst
}

// TxnStatus is the answer of CheckTxnStatus.
type TxnStatus struct {
	// Lock is set when the primary is still locked (not expired, or an
	// async-commit lock whose fate its secondaries decide).
	Lock *Lock
	// CommitTs is set when the txn committed.
	CommitTs uint64
	// RolledBack is set when the txn is (now) rolled back.
	RolledBack bool
}

// CheckTxnStatus decides the fate of txn lockTs from its primary key, as
// TiKV does for a lock resolver: a live lock is reported; an expired
// non-async lock (TTL measured between the physical parts of lockTs and
// currentTs) is rolled back; a missing lock is looked up in the write
// records, and when nothing is there a rollback record is written so the
// txn can never commit.
func (s *Store) CheckTxnStatus(primary []byte, lockTs, currentTs uint64) TxnStatus {
	e := s.getOrCreate(primary)
	if e.lockedBy(lockTs) {
		h := e.lock.hdr
		expired := uint64(tso.Physical(currentTs)) >= uint64(tso.Physical(lockTs))+h.ttl
		if !expired || h.async {
			c := e.lockView()
			return TxnStatus{Lock: &c}
		}
		s.rollbackKey(e, lockTs)
		return TxnStatus{RolledBack: true}
	}
	if r := e.recordOf(lockTs); r != nil {
		if r.Kind == WriteRollback {
			return TxnStatus{RolledBack: true}
		}
		return TxnStatus{CommitTs: r.CommitTs}
	}
	s.rollbackKey(e, lockTs)
	return TxnStatus{RolledBack: true}
}

// SecondaryStatus is the answer of CheckSecondaryLocks.
type SecondaryStatus struct {
	// Locks of the txn still present on the keys.
	Locks []Lock
	// CommitTs > 0: some key is already committed at this ts.
	CommitTs uint64
	// RolledBack: some key had neither lock nor commit; a rollback record
	// was written there, so the whole txn must roll back.
	RolledBack bool
}

// CheckSecondaryLocks inspects the keys of async-commit txn startTs. If
// every key is locked the txn counts as committed at the max min_commit_ts.
func (s *Store) CheckSecondaryLocks(keys [][]byte, startTs uint64) SecondaryStatus {
	var st SecondaryStatus
	for _, k := range keys {
		e := s.getOrCreate(k)
		if e.lockedBy(startTs) {
			st.Locks = append(st.Locks, e.lockView())
			continue
		}
		if r := e.recordOf(startTs); r != nil {
			if r.Kind == WriteRollback {
				st.RolledBack = true
			} else {
				st.CommitTs = r.CommitTs
			}
			continue
		}
		s.rollbackKey(e, startTs)
		st.RolledBack = true
	}
	return st
}

// ResolveLock finishes txn startTs on every key in [start, end) it still
// locks: commit at commitTs when commitTs > 0, otherwise roll back. It
// returns the number of locks resolved.
func (s *Store) ResolveLock(start, end []byte, startTs, commitTs uint64) (int, error) {
	var hits []*entry
	s.ascend(start, end, func(e *entry) bool {
		if e.lockedBy(startTs) {
			hits = append(hits, e)
		}
		return true
	})
	for _, e := range hits {
		if mc := e.lock.hdr.minCommitTs; commitTs > 0 && commitTs < mc {
			return 0, &CommitTsExpiredError{Key: e.key, StartTs: startTs, CommitTs: commitTs, MinCommitTs: mc}
		}
		if commitTs > 0 && commitTs <= startTs {
			return 0, &BadTimestampError{What: "resolve commit_ts must be greater than start_ts"}
		}
	}
	for _, e := range hits {
		if commitTs > 0 {
			s.commitLock(e, commitTs)
		} else {
			s.rollbackKey(e, startTs)
		}
	}
	return len(hits), nil
}

// GCSafePoint returns the current safe point.
func (s *Store) GCSafePoint() uint64 { return s.safePoint }

// GC raises the safe point to sp (never lowers it) and drops versions no
// read at or above sp can see: for each key, everything older than the
// newest data record with commit_ts <= sp, that record too if it is a
// delete, and rollback/lock records below sp.
func (s *Store) GC(sp uint64) {
	if !s.RaiseSafePoint(sp) {
		return
	}
	var empty []*entry
	s.tree.Ascend(func(e *entry) bool {
		if s.gcEntry(e) {
			empty = append(empty, e)
		}
		return true
	})
	for _, e := range empty {
		s.remove(e)
	}
}

// RaiseSafePoint raises the safe point to sp (journaled; reads below it
// fail from now on) without sweeping: the versions it frees are dropped
// key by key by SweepChunk or SnapshotChunk, so a background GC never
// holds the store for a whole pass (MVCC-7 as seen by readers is the
// same). It reports whether the safe point moved.
func (s *Store) RaiseSafePoint(sp uint64) bool {
	if sp <= s.safePoint {
		return false
	}
	s.safePoint = sp
	if s.j != nil {
		s.j.GC(sp)
	}
	return true
}

// gcEntry drops e's versions below the safe point (MVCC-7) and reports
// whether e is left holding nothing.
func (s *Store) gcEntry(e *entry) bool {
	sp := s.safePoint
	if sp == 0 || len(e.writes) == 0 || (len(e.writes) == 1 && e.writes[0].CommitTs > sp) {
		return len(e.writes) == 0 && e.lock == nil
	}
	keep := e.writes[:0]
	cut := -1
	for i := len(e.writes) - 1; i >= 0; i-- {
		if w := &e.writes[i]; w.CommitTs <= sp && w.isData() {
			cut = i
			break
		}
	}
	for i, w := range e.writes {
		switch {
		case i < cut:
		case i == cut && w.Kind == WriteDelete:
		case w.CommitTs <= sp && !w.isData():
		default:
			keep = append(keep, w)
		}
	}
	for i := len(keep); i < len(e.writes); i++ {
		e.writes[i] = Write{}
	}
	e.writes = keep
	return len(e.writes) == 0 && e.lock == nil
}

// SweepChunk garbage-collects up to limit keys after `after` (from the
// first key when first) and returns the last key visited and whether the
// pass reached the end. A caller walks the store chunk by chunk,
// releasing its lock in between.
func (s *Store) SweepChunk(after []byte, first bool, limit int) (last []byte, done bool) {
	last, _, done = s.SnapshotChunk(after, first, limit, nil)
	return last, done
}

// SnapshotChunk is SweepChunk that also replays each visited key's state
// into j (write records in commit order, then the lock; nil j: sweep
// only): a compaction's copy of the store, one chunk per lock hold. n is
// the number of keys visited.
func (s *Store) SnapshotChunk(after []byte, first bool, limit int, j Journal) (last []byte, n int, done bool) {
	done = true
	var empty []*entry
	visit := func(e *entry) bool {
		if !first && bytes.Equal(e.key, after) {
			return true
		}
		if n == limit {
			done = false
			return false
		}
		if s.gcEntry(e) {
			empty = append(empty, e)
		} else if j != nil {
			for i := range e.writes {
				j.AddWrite(e.key, e.writes[i], false)
			}
			if e.lock != nil {
				s.journalLock(j, e)
			}
		}
		last = e.key
		n++
		return true
	}
	if first {
		s.tree.Ascend(visit)
	} else {
		s.tree.AscendGreaterOrEqual(&entry{key: after}, visit)
	}
	for _, e := range empty {
		s.remove(e)
	}
	return last, n, done
}

// NumKeys is the number of keys the store holds (versions, locks or
// rollback records).
func (s *Store) NumKeys() int { return s.tree.Len() }

// LatestValue returns the newest committed value of key, ignoring locks
// (nil when absent or deleted). The CDC feed uses it as the old value of a
// lock found by the incremental scan.
func (s *Store) LatestValue(key []byte) []byte {
	if e := s.get(key); e != nil {
		return e.valueAt(^uint64(0))
	}
	return nil
}
