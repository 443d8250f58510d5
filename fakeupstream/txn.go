package fakeupstream

import (
	"bytes"
	"errors"
	"fmt"
	"sort"

	"github.com/google/btree"

	"github.com/searchfabric/sfemu/fakeupstream/mvcc"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
)

// ErrCommitBelowResolved: a hand-picked commit ts is at or below a resolved
// ts the feed already promised, which would make CDC clients lose the
// change. Real TiKV prevents this through TSO order and max_ts.
var ErrCommitBelowResolved = errors.New("commit ts is not above the feed's issued resolved ts")

// Txn is a transaction driven step by step by a test (or the SQL layer):
// buffer mutations, then prewrite them in a chosen order, commit with a
// TSO or hand-picked commit ts, commit only some keys, leave locks behind,
// roll back, or commit in one phase.
//
// A Txn is not safe for concurrent use; the cluster it writes to is.
type Txn struct {
	c          *Cluster
	startTs    uint64
	muts       mutBuf
	index      map[string]int
	primary    []byte
	prewritten map[string]bool
	committed  bool
	ttl        uint64
	async      bool
	minCommit  uint64
	// sp is the open savepoint (nil: none); undo holds the mutations that
	// writes after it replaced, to put back on RollbackToSavepoint.
	sp   *savepoint
	undo []undoEntry
	// sorted orders the buffer positions by key once the txn is past
	// smallTxn; probe is the search key its comparisons use for probeIdx.
	sorted *btree.BTreeG[int]
	probe  []byte
	// allPrewritten: one Prewrite took the whole buffer (prewritten then
	// stays empty); held is what the store locked for it, the buffer
	// being gone (MVCC-12).
	allPrewritten bool
	held          *mvcc.Held
	// deferSync: commits return once applied and leave the wait for
	// their log records to WaitDurable (syncLSN is the offset to wait
	// for).
	deferSync bool
	syncLSN   int64
}

type savepoint struct {
	n       int
	primary []byte
}

type undoEntry struct {
	i   int
	old mvcc.Mutation
}

// Begin starts a transaction with a fresh TSO start ts.
func (c *Cluster) Begin() *Txn { return c.BeginAt(c.oracle.Next()) }

// BeginAt starts a transaction with a chosen start ts (the oracle is told,
// so it never hands out that ts).
func (c *Cluster) BeginAt(startTs uint64) *Txn {
	c.oracle.Observe(startTs)
	return &Txn{c: c, startTs: startTs, ttl: c.cfg.LockTTLMs}
}

// StartTs is the transaction's start ts.
func (t *Txn) StartTs() uint64 { return t.startTs }

// SetTTL sets the lock TTL in milliseconds for later prewrites.
func (t *Txn) SetTTL(ms uint64) { t.ttl = ms }

// SetPrimary chooses the primary key (default: the first key written).
func (t *Txn) SetPrimary(key []byte) { t.primary = cloneBytes(key) }

// Primary is the primary key.
func (t *Txn) Primary() []byte { return t.primary }

func (t *Txn) add(m mvcc.Mutation) {
	if t.primary == nil {
		t.primary = cloneBytes(m.Key)
	}
	if i, ok := t.find(m.Key); ok {
		if t.sp != nil && i < t.sp.n {
			t.undo = append(t.undo, undoEntry{i: i, old: *t.muts.at(i)})
		}
		*t.muts.at(i) = m
		return
	}
	t.muts.push(m)
	if n := t.muts.len(); t.index != nil {
		t.index[string(m.Key)] = n - 1
		t.sorted.ReplaceOrInsert(n - 1)
	} else if n > smallTxn {
		t.index = make(map[string]int, n)
		t.sorted = btree.NewG[int](32, t.lessMut)
		for i := 0; i < n; i++ {
			t.index[string(t.muts.at(i).Key)] = i
			t.sorted.ReplaceOrInsert(i)
		}
	}
}

// smallTxn is the size up to which buffered keys are searched linearly
// (most test and demo transactions write a row or two; a map per txn
// would dominate the cost of a single-row commit). Above it a map finds a
// key and a btree of buffer positions orders them for Scan.
const smallTxn = 8

// probeIdx stands for t.probe in t.sorted's comparisons (a key that need
// not be buffered).
const probeIdx = -1

func (t *Txn) keyAt(i int) []byte {
	if i == probeIdx {
		return t.probe
	}
	return t.muts.at(i).Key
}

func (t *Txn) lessMut(a, b int) bool { return bytes.Compare(t.keyAt(a), t.keyAt(b)) < 0 }

func (t *Txn) find(key []byte) (int, bool) {
	if t.index != nil {
		i, ok := t.index[string(key)]
		return i, ok
	}
	for i := 0; i < t.muts.len(); i++ {
		if bytes.Equal(t.muts.at(i).Key, key) {
			return i, true
		}
	}
	return 0, false
}

// bufferedIn calls fn for the buffered mutations with keys in [start, end)
// (nil end = +inf), in key order.
func (t *Txn) bufferedIn(start, end []byte, fn func(m *mvcc.Mutation)) {
	if t.sorted == nil {
		idx := make([]int, 0, t.muts.len())
		for i := 0; i < t.muts.len(); i++ {
			if k := t.muts.at(i).Key; bytes.Compare(k, start) >= 0 && (end == nil || bytes.Compare(k, end) < 0) {
				idx = append(idx, i)
			}
		}
		sort.Slice(idx, func(a, b int) bool { return bytes.Compare(t.muts.at(idx[a]).Key, t.muts.at(idx[b]).Key) < 0 })
		for _, i := range idx {
			fn(t.muts.at(i))
		}
		return
	}
	t.probe = start
	var hits []int
	t.sorted.AscendGreaterOrEqual(probeIdx, func(i int) bool {
		if end != nil && bytes.Compare(t.muts.at(i).Key, end) >= 0 {
			return false
		}
		hits = append(hits, i)
		return true
	})
	t.probe = nil
	for _, i := range hits {
		fn(t.muts.at(i))
	}
}

// Set buffers a put of key (the last write of a key wins, as in TiDB's
// membuffer).
func (t *Txn) Set(key, value []byte) {
	t.add(mvcc.Mutation{Op: mvcc.OpPut, Key: cloneBytes(key), Value: cloneBytes(value)})
}

// Delete buffers a delete of key.
func (t *Txn) Delete(key []byte) { t.add(mvcc.Mutation{Op: mvcc.OpDel, Key: cloneBytes(key)}) }

// LockKey buffers a lock-only mutation (SELECT FOR UPDATE).
func (t *Txn) LockKey(key []byte) { t.add(mvcc.Mutation{Op: mvcc.OpLock, Key: cloneBytes(key)}) }

// Savepoint marks the buffer: RollbackToSavepoint undoes every write
// made after it (a failing SQL statement inside a transaction), without a
// second copy of the buffer. A later Savepoint replaces the mark.
func (t *Txn) Savepoint() {
	t.sp = &savepoint{n: t.muts.len(), primary: t.primary}
	t.undo = t.undo[:0]
}

// ReleaseSavepoint drops the mark (the statement succeeded).
func (t *Txn) ReleaseSavepoint() {
	t.sp = nil
	t.undo = t.undo[:0]
}

// RollbackToSavepoint puts the buffer back as it was at Savepoint: keys
// first written since are dropped, keys overwritten get their old
// mutation back. Nothing may have been prewritten since the mark.
func (t *Txn) RollbackToSavepoint() error {
	if t.sp == nil {
		return fmt.Errorf("fakeupstream: txn %d has no savepoint", t.startTs)
	}
	if len(t.prewritten) > 0 || t.allPrewritten || t.committed {
		return fmt.Errorf("fakeupstream: txn %d: rollback to savepoint after prewrite or commit", t.startTs)
	}
	for j := len(t.undo) - 1; j >= 0; j-- {
		*t.muts.at(t.undo[j].i) = t.undo[j].old
	}
	for i := t.sp.n; i < t.muts.len(); i++ {
		if t.index != nil {
			delete(t.index, string(t.muts.at(i).Key))
			t.sorted.Delete(i)
		}
	}
	t.muts.truncate(t.sp.n)
	t.primary = t.sp.primary
	t.ReleaseSavepoint()
	return nil
}

// Discard abandons a transaction that never prewrote: its buffer is
// dropped and the store never hears of it (Rollback would leave rollback
// records for every buffered key).
func (t *Txn) Discard() error {
	if len(t.prewritten) > 0 || t.allPrewritten || t.committed {
		return fmt.Errorf("fakeupstream: txn %d: discard after prewrite or commit (use Rollback)", t.startTs)
	}
	t.committed = true
	t.muts, t.index, t.sorted, t.undo, t.sp = mutBuf{}, nil, nil, nil, nil
	return nil
}

// Len is the number of buffered keys.
func (t *Txn) Len() int {
	if t.held != nil {
		return t.held.Len()
	}
	return t.muts.len()
}

// Keys lists the buffered keys in write order.
func (t *Txn) Keys() [][]byte {
	if t.held != nil {
		return t.held.Keys()
	}
	out := make([][]byte, 0, t.muts.len())
	t.muts.each(func(m *mvcc.Mutation) { out = append(out, m.Key) })
	return out
}

// errHandedOver: the txn's buffer went to the store with its locks.
func (t *Txn) errHandedOver() error {
	return fmt.Errorf("fakeupstream: txn %d: read after the whole buffer was prewritten (the store holds it now)", t.startTs)
}

// Get reads key at the start ts, seeing the txn's own buffered writes.
func (t *Txn) Get(key []byte) ([]byte, error) {
	if t.held != nil {
		return nil, t.errHandedOver()
	}
	if i, ok := t.find(key); ok {
		switch m := t.muts.at(i); m.Op {
		case mvcc.OpPut:
			return cloneBytes(m.Value), nil
		case mvcc.OpDel:
			return nil, nil
		}
	}
	t.c.mu.Lock()
	v, err := t.c.store.Get(key, t.startTs)
	v = cloneBytes(v)
	lsn := t.c.lsnLocked()
	t.c.mu.Unlock()
	if perr := t.readDurable(lsn); perr != nil {
		return nil, perr
	}
	return v, err
}

// readDurable makes what a read saw (everything applied up to lsn)
// durable before the reader goes on (DUR-3), or, in a txn with deferred
// durability, leaves that wait to WaitDurable: the caller then reads
// under its own lock without an fsync and must not let anything it read
// out before WaitDurable returns (DUR-15).
func (t *Txn) readDurable(lsn int64) error {
	if t.deferSync {
		t.syncLSN = max(t.syncLSN, lsn)
		return nil
	}
	return t.c.persist(lsn)
}

// Scan reads raw [start, end) (nil end = +inf) at the start ts merged with
// the txn's own buffered writes, in key order, up to limit (<= 0: all).
// With a limit the store is read a page at a time, so a caller paging
// through a large range never holds more than about limit pairs.
func (t *Txn) Scan(start, end []byte, limit int) ([]kvevent.KV, error) {
	if t.held != nil {
		return nil, t.errHandedOver()
	}
	var out []kvevent.KV
	cur := start
	for {
		t.c.mu.Lock()
		kvs, err := t.c.store.Scan(cur, end, t.startTs, max(limit, 0))
		var page []kvevent.KV
		if err == nil {
			page = make([]kvevent.KV, len(kvs))
			for i, kv := range kvs {
				page[i] = kvevent.KV{Key: kv.Key, Value: cloneBytes(kv.Value)}
			}
		}
		lsn := t.c.lsnLocked()
		t.c.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if err := t.readDurable(lsn); err != nil {
			return nil, err
		}
		// The store answered for [cur, hi): everything up to its last key
		// when the page is full, else the whole rest of the range.
		done := limit <= 0 || len(page) < limit
		hi := end
		if !done {
			hi = append(cloneBytes(page[len(page)-1].Key), 0)
		}
		out = t.mergeBuffered(out, page, cur, hi)
		if done || len(out) >= limit {
			break
		}
		cur = hi
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// mergeBuffered appends to out the store's page of [lo, hi) overlaid with
// the buffered writes in that range, in key order.
func (t *Txn) mergeBuffered(out, page []kvevent.KV, lo, hi []byte) []kvevent.KV {
	i := 0
	t.bufferedIn(lo, hi, func(m *mvcc.Mutation) {
		for i < len(page) && bytes.Compare(page[i].Key, m.Key) < 0 {
			out = append(out, kvevent.KV{Key: cloneBytes(page[i].Key), Value: page[i].Value})
			i++
		}
		if i < len(page) && bytes.Equal(page[i].Key, m.Key) {
			i++ // the buffered write replaces the stored value
		}
		switch m.Op {
		case mvcc.OpPut:
			out = append(out, kvevent.KV{Key: cloneBytes(m.Key), Value: cloneBytes(m.Value)})
		case mvcc.OpLock:
			// a lock-only mutation changes no value: keep the stored one
			if i > 0 && bytes.Equal(page[i-1].Key, m.Key) {
				out = append(out, kvevent.KV{Key: cloneBytes(page[i-1].Key), Value: page[i-1].Value})
			}
		}
	})
	for ; i < len(page); i++ {
		out = append(out, kvevent.KV{Key: cloneBytes(page[i].Key), Value: page[i].Value})
	}
	return out
}

// MinCommitTs is the async-commit min_commit_ts (0 before the first
// async prewrite); it is the txn's commit ts.
func (t *Txn) MinCommitTs() uint64 { return t.minCommit }

// UseAsyncCommit makes later prewrites async-commit locks: each carries
// min_commit_ts (a fresh TSO at the first prewrite) and the primary lists
// every other key, so a resolver can commit the txn from its locks alone.
// Call it before the first Prewrite.
func (t *Txn) UseAsyncCommit() { t.async = true }

func (t *Txn) mutation(key []byte) (mvcc.Mutation, error) {
	i, ok := t.find(key)
	if !ok {
		return mvcc.Mutation{}, fmt.Errorf("fakeupstream: txn %d has no buffered write of key %x", t.startTs, key)
	}
	return *t.muts.at(i), nil
}

// Prewrite writes locks for the given buffered keys, in that order (all
// not yet prewritten keys, in write order, when none are given). Each call
// is one prewrite request: the feed sees its PREWRITE rows in key order
// of the call.
func (t *Txn) Prewrite(keys ...[]byte) error {
	if t.committed {
		return fmt.Errorf("fakeupstream: txn %d already finished", t.startTs)
	}
	if t.allPrewritten {
		return nil
	}
	var muts []mvcc.Mutation
	all := len(keys) == 0 && len(t.prewritten) == 0
	switch {
	case all:
		// The whole buffer in one request (a SQL COMMIT): no key list or
		// set of prewritten keys, so a large txn's keys are not copied.
	case len(keys) == 0:
		t.muts.each(func(m *mvcc.Mutation) {
			if !t.prewritten[string(m.Key)] {
				keys = append(keys, m.Key)
			}
		})
		fallthrough
	default:
		muts = make([]mvcc.Mutation, 0, len(keys))
		for _, k := range keys {
			m, err := t.mutation(k)
			if err != nil {
				return err
			}
			muts = append(muts, m)
		}
	}
	// The whole buffer goes to the store without a copy: Set, Delete and
	// LockKey cloned what they buffered, and nothing writes to it after
	// the prewrite (MVCC-11).
	opts := mvcc.PrewriteOptions{Primary: t.primary, StartTs: t.startTs, TTL: t.ttl, Handoff: all}
	if all {
		// The buffer is the store's from here and never changes again:
		// its index (a map entry and a btree item per key) goes before the
		// store makes a lock per key, so a large txn never holds both
		// (the buffer itself goes chunk by chunk as the store locks it,
		// and the commit walks what the store held; a failed prewrite
		// leaves the buffer for a rollback or discard).
		t.index, t.sorted = nil, nil
	}
	t.c.mu.Lock()
	if t.async {
		// min_commit_ts is taken under the cluster lock, as TiKV derives
		// it under its concurrency manager: every resolved ts issued
		// before is below it, every later one sees the lock.
		if t.minCommit == 0 {
			t.minCommit = t.c.oracle.Next()
		}
		opts.AsyncCommit, opts.MinCommitTs = true, t.minCommit
		t.muts.each(func(m *mvcc.Mutation) {
			if !bytes.Equal(m.Key, t.primary) {
				opts.Secondaries = append(opts.Secondaries, m.Key)
			}
		})
	}
	var err error
	if all {
		t.held, err = t.c.store.PrewriteChunks(t.muts.chunks, opts)
		if err == nil {
			t.muts = mutBuf{} // its chunks are gone (PrewriteChunks)
		}
	} else {
		err = t.c.store.Prewrite(muts, opts)
	}
	lsn := t.c.lsnLocked()
	t.c.mu.Unlock()
	if err != nil {
		return err
	}
	// An async-commit txn is committed once all its locks exist, so its
	// prewrites are durable before they are acknowledged. Other locks are
	// made durable by the commit that follows them in the log (DUR-2).
	if t.async {
		if err := t.c.persist(lsn); err != nil {
			return err
		}
	}
	if all {
		t.allPrewritten = true
		return nil
	}
	if t.prewritten == nil {
		t.prewritten = map[string]bool{}
	}
	for _, k := range keys {
		t.prewritten[string(k)] = true
	}
	return nil
}

// Commit prewrites whatever is left, takes a commit ts from TSO (for async
// commit: the min_commit_ts) and commits the primary, then the secondaries.
func (t *Txn) Commit() (uint64, error) {
	if err := t.Prewrite(); err != nil {
		return 0, err
	}
	ts := t.minCommit
	if !t.async {
		ts = t.c.oracle.Next()
	}
	return ts, t.CommitAt(ts)
}

func (t *Txn) unprewritten() [][]byte {
	if t.allPrewritten {
		return nil
	}
	var out [][]byte
	t.muts.each(func(m *mvcc.Mutation) {
		if !t.prewritten[string(m.Key)] {
			out = append(out, m.Key)
		}
	})
	return out
}

// CommitAt prewrites whatever is left and commits every key at the chosen
// commitTs, primary first.
func (t *Txn) CommitAt(commitTs uint64) error {
	if left := t.unprewritten(); len(left) > 0 {
		if err := t.Prewrite(left...); err != nil {
			return err
		}
	}
	// The keys are taken from the buffer in place, primary first: a large
	// txn gets no list of its keys (as MVCC-11 for the data).
	if err := t.commitKeys(commitTs, nil, true); err != nil {
		return err
	}
	t.committed = true
	return nil
}

// CommitKeys commits just the given prewritten keys at commitTs, in that
// order, one request each; keys left out stay locked (a crashed client
// that committed only its primary, for the resolver to finish).
func (t *Txn) CommitKeys(commitTs uint64, keys ...[]byte) error {
	return t.commitKeys(commitTs, keys, false)
}

// commitKeys commits keys, or with whole the primary and then every
// other buffered key.
func (t *Txn) commitKeys(commitTs uint64, keys [][]byte, whole bool) error {
	if err := t.c.checkCommitTs(t.startTs, commitTs); err != nil {
		return err
	}
	t.c.mu.Lock()
	err := t.commitKeysLocked(commitTs, keys, whole)
	lsn := t.c.lsnLocked()
	t.c.mu.Unlock()
	if t.deferSync {
		t.syncLSN = max(t.syncLSN, lsn)
		return err
	}
	if perr := t.c.persist(lsn); perr != nil && err == nil {
		return perr
	}
	return err
}

// DeferDurability makes this txn's commits (Commit, CommitAt, CommitKeys)
// return once they are applied, and its reads (Get, Scan) return what
// they read, without waiting for the log: the caller must call
// WaitDurable before it acknowledges the commit, or lets out anything it
// read or derived from a read, to anyone (DUR-2, DUR-15). The SQL front
// runs its transactions this way under its statement lock and waits
// after releasing it, so statements of other sessions proceed meanwhile
// and one fsync covers the commits of several (DUR-13).
func (t *Txn) DeferDurability() { t.deferSync = true }

// WaitDurable returns once everything the txn committed, and everything
// its reads saw, is on disk (at once in memory or when nothing was
// deferred).
func (t *Txn) WaitDurable() error {
	lsn := t.syncLSN
	t.syncLSN = 0
	return t.c.persist(lsn)
}

func (t *Txn) commitKeysLocked(commitTs uint64, keys [][]byte, whole bool) error {
	// Only keys this txn still locks get a new write record; the others
	// are already committed (maybe by a resolver) or rolled back, and
	// mvcc.Commit answers for them. A commit ts above every resolved ts
	// issued (a fresh TSO: the usual case) needs no look at the locks.
	if commitTs <= t.c.feed.MaxIssuedResolvedTs() {
		if whole {
			keys = t.commitOrder()
		}
		var locked [][]byte
		for _, k := range keys {
			if l, ok := t.c.store.LockOf(k); ok && l.StartTs == t.startTs {
				locked = append(locked, k)
			}
		}
		if err := t.c.checkIssuedLocked(commitTs, locked); err != nil {
			return err
		}
	}
	one := [][]byte{nil}
	commit := func(k []byte) error {
		one[0] = k
		return t.c.store.Commit(one, t.startTs, commitTs)
	}
	if !whole {
		for _, k := range keys {
			if err := commit(k); err != nil {
				return err
			}
		}
		return nil
	}
	if err := commit(t.primary); err != nil {
		return err
	}
	if t.held != nil {
		// The rest in one pass over what the prewrite locked: no key
		// list, no lookup per key (the primary, committed, is skipped).
		return t.c.store.CommitHeld(t.held, commitTs)
	}
	for i := 0; i < t.muts.len(); i++ {
		if k := t.muts.at(i).Key; !bytes.Equal(k, t.primary) {
			if err := commit(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// commitOrder lists the buffered keys, primary first.
func (t *Txn) commitOrder() [][]byte {
	keys := [][]byte{t.primary}
	for _, k := range t.Keys() {
		if !bytes.Equal(k, t.primary) {
			keys = append(keys, k)
		}
	}
	return keys
}

// Commit1PC commits every buffered write in one phase at a fresh TSO
// commit ts (the feed sees COMMITTED rows). Nothing may be prewritten yet.
// The ts is taken under the cluster lock, as TiKV computes a 1PC commit ts
// under its concurrency manager, so no resolved-ts round can slip between
// choosing the ts and writing.
func (t *Txn) Commit1PC() (uint64, error) {
	t.c.mu.Lock()
	ts := t.c.oracle.Next()
	err := t.commit1PCLocked(ts)
	lsn := t.c.lsnLocked()
	t.c.mu.Unlock()
	if perr := t.c.persist(lsn); perr != nil && err == nil {
		err = perr
	}
	return ts, err
}

// Commit1PCAt is Commit1PC with a chosen commit ts.
func (t *Txn) Commit1PCAt(commitTs uint64) error {
	t.c.mu.Lock()
	err := t.commit1PCLocked(commitTs)
	lsn := t.c.lsnLocked()
	t.c.mu.Unlock()
	if perr := t.c.persist(lsn); perr != nil && err == nil {
		err = perr
	}
	return err
}

func (t *Txn) commit1PCLocked(commitTs uint64) error {
	if len(t.prewritten) > 0 || t.allPrewritten || t.committed {
		return fmt.Errorf("fakeupstream: txn %d: 1PC after prewrite or commit", t.startTs)
	}
	if err := t.c.checkCommitTs(t.startTs, commitTs); err != nil {
		return err
	}
	if err := t.c.checkIssuedLocked(commitTs, t.Keys()); err != nil {
		return err
	}
	if err := t.c.store.OnePC(t.muts.flat(), t.startTs, commitTs); err != nil {
		return err
	}
	t.committed = true
	return nil
}

// Rollback rolls back every buffered key (locks removed, rollback records
// written).
func (t *Txn) Rollback() error {
	t.c.mu.Lock()
	t.committed = true
	err := t.c.store.Rollback(t.Keys(), t.startTs)
	lsn := t.c.lsnLocked()
	t.c.mu.Unlock()
	if perr := t.c.persist(lsn); perr != nil && err == nil {
		err = perr
	}
	return err
}

func (c *Cluster) checkCommitTs(startTs, commitTs uint64) error {
	if commitTs <= startTs {
		return fmt.Errorf("fakeupstream: commit ts %d must be greater than start ts %d", commitTs, startTs)
	}
	c.oracle.Observe(commitTs)
	return nil
}

// checkIssuedLocked refuses a commit ts at or below a resolved ts the feed
// already issued for a region range holding any of keys.
func (c *Cluster) checkIssuedLocked(commitTs uint64, keys [][]byte) error {
	if commitTs > c.feed.MaxIssuedResolvedTs() {
		return nil
	}
	for _, k := range keys {
		c.scratch = codec.EncodeBytes(c.scratch[:0], k)
		if m, ok := c.feed.IssuedAtOrAbove(c.scratch, commitTs); ok {
			return fmt.Errorf("fakeupstream: commit ts %d of key %x, resolved ts %d already issued for its range: %w",
				commitTs, k, m, ErrCommitBelowResolved)
		}
	}
	return nil
}

// Put commits key=value in one 1PC transaction and returns its commit ts
// (a convenience for tests and the demo workload).
func (c *Cluster) Put(key, value []byte) (uint64, error) {
	t := c.Begin()
	t.Set(key, value)
	return t.Commit1PC()
}

// Delete commits a delete of key in one 1PC transaction.
func (c *Cluster) Delete(key []byte) (uint64, error) {
	t := c.Begin()
	t.Delete(key)
	return t.Commit1PC()
}
