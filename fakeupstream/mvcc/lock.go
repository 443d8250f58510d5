package mvcc

import "bytes"

// lockHeader is what every lock written by one prewrite request shares
// (MVCC-12): a large transaction's million locks point at one header
// instead of each repeating the primary, the timestamps and the async
// fields. It never changes once a lock points at it.
type lockHeader struct {
	primary     []byte
	startTs     uint64
	ttl         uint64
	minCommitTs uint64
	async       bool
	// secondaries belong to the primary's lock only (the request that
	// locked the primary carries them; other keys of that request ignore
	// them).
	secondaries [][]byte
}

// keyLock is one key's lock: its request's header and its value (the op
// sits in the entry, in what would otherwise be padding), 32 bytes.
type keyLock struct {
	hdr   *lockHeader
	value []byte
}

// newHeader is the shared header of a prewrite request's locks.
func newHeader(opts *PrewriteOptions) *lockHeader {
	h := &lockHeader{
		primary:     append([]byte(nil), opts.Primary...),
		startTs:     opts.StartTs,
		ttl:         opts.TTL,
		minCommitTs: opts.MinCommitTs,
		async:       opts.AsyncCommit,
	}
	return h
}

// setSecondaries copies the secondaries of an async-commit request into h
// when the request locks the primary (requests of other keys do not keep
// a copy of the txn's key list).
func (h *lockHeader) setSecondaries(opts *PrewriteOptions) {
	if !opts.AsyncCommit || h.secondaries != nil {
		return
	}
	for _, k := range opts.Secondaries {
		h.secondaries = append(h.secondaries, append([]byte(nil), k...))
	}
}

// headerOf is the header a restored lock l shares with the lock restored
// before it when their header fields agree (the locks of one request are
// logged one after the other), else a new one, so a reopened store holds
// a large transaction's locks as compactly as the store that wrote them.
func (s *Store) headerOf(l *Lock) *lockHeader {
	if h := s.restoreHdr; h != nil && h.startTs == l.StartTs && h.ttl == l.TTL &&
		h.minCommitTs == l.MinCommitTs && h.async == l.UseAsyncCommit &&
		len(l.Secondaries) == 0 && bytes.Equal(h.primary, l.Primary) {
		return h
	}
	opts := PrewriteOptions{Primary: l.Primary, StartTs: l.StartTs, TTL: l.TTL,
		MinCommitTs: l.MinCommitTs, AsyncCommit: l.UseAsyncCommit, Secondaries: l.Secondaries}
	h := newHeader(&opts)
	h.setSecondaries(&opts)
	s.restoreHdr = h
	return h
}

// setLock locks e with op and value under header h.
func (s *Store) setLock(e *entry, h *lockHeader, op Op, value []byte) {
	e.lock = &keyLock{hdr: h, value: value}
	e.lockOp = op
	s.nlocks++
}

// clearLock drops e's lock.
func (s *Store) clearLock(e *entry) {
	e.lock = nil
	e.lockOp = 0
	s.nlocks--
}

// lockedBy reports whether txn startTs holds e's lock.
func (e *entry) lockedBy(startTs uint64) bool {
	return e.lock != nil && e.lock.hdr.startTs == startTs
}

// lockView is e's lock as the public Lock (the slices are the store's:
// callers must not modify them). Only the primary's lock lists the
// secondaries.
func (e *entry) lockView() Lock {
	h := e.lock.hdr
	l := Lock{
		Key:            e.key,
		Primary:        h.primary,
		StartTs:        h.startTs,
		TTL:            h.ttl,
		Op:             e.lockOp,
		Value:          e.lock.value,
		MinCommitTs:    h.minCommitTs,
		UseAsyncCommit: h.async,
	}
	if h.secondaries != nil && bytes.Equal(e.key, h.primary) {
		l.Secondaries = h.secondaries
	}
	return l
}

// journalLock hands e's lock to the journal through one reused Lock (the
// journal encodes it before it returns), so a large prewrite does not
// allocate a Lock per key to log it.
func (s *Store) journalLock(j Journal, e *entry) {
	s.jlock = e.lockView()
	j.PutLock(&s.jlock)
	s.jlock = Lock{}
}
