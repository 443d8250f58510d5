package mvcc

// Held is the set of locks one whole-transaction prewrite made
// (PrewriteChunks): the entries it locked, in mutation order, 8 bytes a
// key. The transaction commits through it (CommitHeld) without a list of
// its keys or a lookup per key, so a large transaction's buffer can go
// as soon as its locks exist (MVCC-12).
type Held struct {
	startTs uint64
	entries []*entry
}

// Len is the number of keys held.
func (h *Held) Len() int { return len(h.entries) }

// Keys lists the held keys in mutation order (the store's slices: do not
// modify them).
func (h *Held) Keys() [][]byte {
	out := make([][]byte, len(h.entries))
	for i, e := range h.entries {
		out[i] = e.key
	}
	return out
}

// PrewriteChunks is Prewrite of every mutation of chunks, in order, as
// one request, all or nothing, with the keys and values handed over to
// the store (PrewriteOptions.Handoff is implied). Once a chunk's locks
// exist, chunks[i] is set to nil, so a caller that holds its buffer only
// through chunks frees it chunk by chunk while the locks are made: a
// large transaction never holds its buffer entries and its locks at once.
func (s *Store) PrewriteChunks(chunks [][]Mutation, opts PrewriteOptions) (*Held, error) {
	if opts.StartTs == 0 {
		return nil, &BadTimestampError{What: "prewrite with start_ts 0"}
	}
	opts.Handoff = true
	n := 0
	for _, ch := range chunks {
		n += len(ch)
	}
	held := &Held{startTs: opts.StartTs, entries: make([]*entry, 0, n)}
	for _, ch := range chunks {
		for i := range ch {
			e := s.get(ch[i].Key)
			if e != nil {
				if err := conflictOf(e, opts.StartTs); err != nil {
					return nil, err
				}
			}
			held.entries = append(held.entries, e)
		}
	}
	h := newHeader(&opts)
	at := 0
	for ci, ch := range chunks {
		for i := range ch {
			held.entries[at] = s.lockOne(held.entries[at], h, &ch[i], &opts)
			at++
		}
		chunks[ci] = nil
	}
	return held, nil
}

// CommitHeld commits every key of held at commitTs that its txn still
// locks, in held order, after checking them all: a key neither locked nor
// committed by the txn fails it (*LockNotFoundError, *TxnRolledBackError,
// *CommitTsExpiredError) before anything is committed; keys already
// committed (the primary, or a resolver's work) are skipped.
func (s *Store) CommitHeld(held *Held, commitTs uint64) error {
	startTs := held.startTs
	if commitTs <= startTs {
		return &BadTimestampError{What: "commit_ts must be greater than start_ts"}
	}
	for _, e := range held.entries {
		if e.lockedBy(startTs) {
			if mc := e.lock.hdr.minCommitTs; commitTs < mc {
				return &CommitTsExpiredError{Key: e.key, StartTs: startTs, CommitTs: commitTs, MinCommitTs: mc}
			}
			continue
		}
		switch r := e.recordOf(startTs); {
		case r == nil:
			return &LockNotFoundError{Key: e.key, StartTs: startTs}
		case r.Kind == WriteRollback:
			return &TxnRolledBackError{Key: e.key, StartTs: startTs}
		}
	}
	for _, e := range held.entries {
		if e.lockedBy(startTs) {
			s.commitLock(e, commitTs)
		}
	}
	return nil
}
