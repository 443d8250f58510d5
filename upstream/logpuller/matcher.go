package logpuller

import (
	"fmt"
	"math/bits"

	"github.com/pingcap/kvproto/pkg/cdcpb"

	"github.com/searchfabric/sfemu/internal/invariants"
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
// Prewrites live in memory (held) or, past the memory quota, in runs
// (LP13-LP16); a key's copies are resolved by lookup.
type matcher struct {
	held            prewriteTable
	cachedCommits   []*cdcpb.Event_Row
	cachedRollbacks []*cdcpb.Event_Row
	bytes           int // heap bytes of held (its bytes), charged against the quotas

	runs []*spilledRun // finished runs, oldest first
	tail *runBuilder   // the open run prewrites go to when memory is full
	hits []runHit      // scratch of lookup

	// Where the last prewriteDelta or lookup found its key in held:
	// the key's hash, its slot, and the entry (-1: not held). putPrewrite
	// and take use them instead of hashing and probing again.
	at struct {
		h        uint64
		slot, in int
	}
}

type runHit struct {
	run *spilledRun
	n   int
	rec *PrewriteRecord
}

func newMatcher() *matcher { return &matcher{} }

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

// prewriteDelta is the change in held bytes putPrewrite would make (the
// row's copy, and the table's growth for a new entry; LP13); ignore is
// set for a "fake" prewrite with an empty value (txn heartbeat,
// pessimistic lock refresh) over a held one, which changes nothing. It
// hashes the key once; putPrewrite reuses the probe.
func (m *matcher) prewriteDelta(r *cdcpb.Event_Row) (delta int, ignore bool) {
	k := matchKey{startTs: r.StartTs, key: bytesView(r.Key)} // a view: no allocation
	m.at.h = keyHash(k)
	m.at.slot, m.at.in = m.held.find(m.at.h, k.startTs, k.key)
	payload := allocSize(len(r.Key) + len(r.Value) + len(r.OldValue))
	if m.at.in < 0 {
		return payload + m.held.growth(), false
	}
	if len(r.Value) == 0 {
		return 0, true
	}
	return payload - allocSize(m.held.entry(m.at.in).payload()), false
}

// putPrewrite caches a PREWRITE in memory: delta is what prewriteDelta
// just returned for it (not ignored) and the caller admitted. It returns
// delta.
func (m *matcher) putPrewrite(r *cdcpb.Event_Row, delta int) int {
	var got int
	if m.at.in >= 0 {
		got = m.held.replace(m.at.in, r)
	} else {
		got = m.held.insert(m.at.h, m.at.slot, r)
	}
	if invariants.Enabled && got != delta {
		panic(fmt.Sprintf("logpuller invariant (LP13) broken: matcher put %d bytes, charged %d", got, delta))
	}
	m.bytes += delta
	return delta
}

// unhold drops the held entry the last lookup found and returns the
// bytes freed.
func (m *matcher) unhold() int {
	freed := m.held.remove(m.at.slot, m.at.in)
	m.bytes -= freed
	m.at.in = -1
	return freed
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
// every copy on disk, and m.at with where k is held in memory.
func (m *matcher) lookup(k matchKey) (p cachedPrewrite, found bool, err error) {
	m.hits = m.hits[:0]
	h := keyHash(k)
	m.at.h = h
	m.at.slot, m.at.in = m.held.find(h, k.startTs, k.key)
	inMem := m.at.in >= 0
	var mem cachedPrewrite
	if inMem {
		mem = m.held.entry(m.at.in).prewrite()
	}
	if inMem && len(mem.value) > 0 && len(m.runs) == 0 {
		return mem, true, nil
	}
	if len(m.runs) > 0 {
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
