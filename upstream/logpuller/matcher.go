package logpuller

import (
	"math/bits"
	"unsafe"

	"github.com/pingcap/kvproto/pkg/cdcpb"
)

type matchKey struct {
	startTs uint64
	key     string
}

// prewrite is a cached PREWRITE's payload. The bytes are copied out of the
// event: a transport may reuse its buffers once HandleEvent returns.
type cachedPrewrite struct {
	value, oldValue []byte
}

// matcher pairs PREWRITE and COMMIT rows of one region subscription. It is
// reset on every re-subscription (a new regionState gets a new matcher).
// Prewrites live in memory (unmatched) or, past the memory quota, in runs
// (LP13-LP16); a key's copies are resolved by lookup.
type matcher struct {
	unmatched       map[matchKey]cachedPrewrite
	cachedCommits   []*cdcpb.Event_Row
	cachedRollbacks []*cdcpb.Event_Row
	bytes           int // payload bytes held in memory, charged against the quotas

	runs []*spilledRun // finished runs, oldest first
	tail *runBuilder   // the open run prewrites go to when memory is full
	hits []runHit      // scratch of lookup
}

type runHit struct {
	run *spilledRun
	n   int
	rec *PrewriteRecord
}

func newMatcher() *matcher {
	return &matcher{unmatched: make(map[matchKey]cachedPrewrite)}
}

// heldCost is what a held prewrite costs the heap (LP13, measured by
// TestLP17_MatcherChargeMatchesTheHeap): its one allocation of key, value
// and old value at the allocator's size, plus its map slot. A slot is 72
// bytes of key and value and a control byte; Go's map keeps 7/16 to 7/8
// of its slots full, so a held entry costs ~120 bytes of map on average.
func heldCost(payload int) int { return allocSize(payload) + matcherSlotBytes }

const matcherSlotBytes = 120

// allocSize approximates the heap bytes of an allocation of n bytes: Go's
// size classes are 8 or 16 bytes apart up to 256 and about 1/8 of the
// size apart up to 32 KiB; a larger object takes whole 8 KiB pages.
func allocSize(n int) int {
	switch {
	case n <= 0:
		return 0
	case n <= 16:
		return (n + 7) &^ 7
	case n <= 256:
		return (n + 15) &^ 15
	case n > 32<<10:
		return (n + 8<<10 - 1) &^ (8<<10 - 1)
	}
	step := 1 << (bits.Len(uint(n-1)) - 3)
	return (n + step - 1) &^ (step - 1)
}

func rowCost(r *cdcpb.Event_Row) int { return heldCost(len(r.Key) + len(r.Value) + len(r.OldValue)) }

func entryCost(k matchKey, p cachedPrewrite) int {
	return heldCost(len(k.key) + len(p.value) + len(p.oldValue))
}

// prewriteDelta is the change in held bytes putPrewrite would make; ignore
// is set for a "fake" prewrite with an empty value (txn heartbeat,
// pessimistic lock refresh) over a held one, which changes nothing.
func (m *matcher) prewriteDelta(r *cdcpb.Event_Row) (delta int, ignore bool) {
	// Looked up without converting the key (no allocation).
	old, exists := m.unmatched[matchKey{startTs: r.StartTs, key: string(r.Key)}]
	if exists && len(r.Value) == 0 {
		return 0, true
	}
	delta = rowCost(r)
	if exists {
		delta -= heldCost(len(r.Key) + len(old.value) + len(old.oldValue))
	}
	return delta, false
}

// putPrewrite caches a PREWRITE in memory: delta is what prewriteDelta
// returned for it (not ignored) and the caller admitted (one map lookup
// per prewrite fewer than asking again). It returns delta.
func (m *matcher) putPrewrite(r *cdcpb.Event_Row, delta int) int {
	key, p := copyPrewrite(r)
	m.unmatched[matchKey{startTs: r.StartTs, key: key}] = p
	m.bytes += delta
	return delta
}

// copyPrewrite copies the row's key, value and old value into one
// allocation: the key comes back as a string (the map key) sharing those
// bytes, which are never written again. Nil stays nil.
func copyPrewrite(r *cdcpb.Event_Row) (string, cachedPrewrite) {
	nk, nv := len(r.Key), len(r.Value)
	buf := make([]byte, 0, nk+nv+len(r.OldValue))
	buf = append(append(append(buf, r.Key...), r.Value...), r.OldValue...)
	var key string
	if nk > 0 {
		key = unsafe.String(&buf[0], nk)
	}
	var p cachedPrewrite
	if r.Value != nil {
		p.value = buf[nk : nk+nv : nk+nv]
	}
	if r.OldValue != nil {
		p.oldValue = buf[nk+nv:]
	}
	return key, p
}

// copyRecord copies a spilled record's value and old value out of the
// block they were read into (one allocation; nil stays nil), so a
// delivered row does not keep the block alive.
func copyRecord(rec *PrewriteRecord) cachedPrewrite {
	nv := len(rec.Value)
	buf := make([]byte, 0, nv+len(rec.OldValue))
	buf = append(append(buf, rec.Value...), rec.OldValue...)
	var p cachedPrewrite
	if rec.Value != nil {
		p.value = buf[:nv:nv]
	}
	if rec.OldValue != nil {
		p.oldValue = buf[nv:]
	}
	return p
}

// lookup resolves k over memory and runs (LP14): the newest copy with a
// value wins (memory is newer than every run, a later run newer than an
// earlier one), else the oldest copy (an empty prewrite never replaces
// one held before it, with or without a value). It fills m.hits with
// every copy on disk.
func (m *matcher) lookup(k matchKey) (p cachedPrewrite, found bool, err error) {
	m.hits = m.hits[:0]
	mem, inMem := m.unmatched[k]
	if inMem && len(mem.value) > 0 && len(m.runs) == 0 {
		return mem, true, nil
	}
	if len(m.runs) > 0 {
		h := keyHash(k)
		for i := len(m.runs) - 1; i >= 0; i-- {
			n, rec, err := m.runs[i].find(k, h)
			if err != nil {
				return p, false, &runError{run: m.runs[i].r.Name(), err: err}
			}
			if rec != nil {
				m.hits = append(m.hits, runHit{run: m.runs[i], n: n, rec: rec})
			}
		}
	}
	switch {
	case inMem && len(mem.value) > 0:
		return mem, true, nil
	case !inMem && len(m.hits) == 0:
		return p, false, nil
	}
	for _, h := range m.hits { // newest first
		if len(h.rec.Value) > 0 {
			return copyRecord(h.rec), true, nil
		}
	}
	if len(m.hits) > 0 {
		return copyRecord(m.hits[len(m.hits)-1].rec), true, nil
	}
	return mem, true, nil
}

// runError names the run a read failed on.
type runError struct {
	run string
	err error
}

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }
