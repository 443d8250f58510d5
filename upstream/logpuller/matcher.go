package logpuller

import (
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
type matcher struct {
	unmatched       map[matchKey]cachedPrewrite
	cachedCommits   []*cdcpb.Event_Row
	cachedRollbacks []*cdcpb.Event_Row
	bytes           int // payload bytes held, charged against the span quota
}

func newMatcher() *matcher {
	return &matcher{unmatched: make(map[matchKey]cachedPrewrite)}
}

func rowCost(r *cdcpb.Event_Row) int { return len(r.Key) + len(r.Value) + len(r.OldValue) + 64 }

// putPrewrite caches a PREWRITE. A "fake" prewrite with an empty value (txn
// heartbeat, pessimistic lock refresh) never overwrites a real one. It
// returns the change in held bytes.
func (m *matcher) putPrewrite(r *cdcpb.Event_Row) int {
	// Looked up without converting the key (no allocation); the map key of
	// a new entry shares the copied bytes.
	old, exists := m.unmatched[matchKey{startTs: r.StartTs, key: string(r.Key)}]
	if exists && len(r.Value) == 0 {
		return 0
	}
	delta := rowCost(r)
	if exists {
		delta -= len(r.Key) + len(old.value) + len(old.oldValue) + 64
	}
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

// matchCommit fills a COMMIT row's value and old value from its PREWRITE.
// Before INITIALIZED, a cached prewrite with an empty value does not match
// (the incremental scan will deliver the row as COMMITTED). It returns
// whether it matched and the change in held bytes.
func (m *matcher) matchCommit(r *cdcpb.Event_Row, initialized bool) (bool, int) {
	k := matchKey{startTs: r.StartTs, key: string(r.Key)}
	p, ok := m.unmatched[k]
	if !ok {
		return false, 0
	}
	if !initialized && len(p.value) == 0 {
		return false, 0
	}
	delete(m.unmatched, k)
	freed := len(k.key) + len(p.value) + len(p.oldValue) + 64
	m.bytes -= freed
	r.Value = p.value
	r.OldValue = p.oldValue
	return true, -freed
}

// rollback forgets a PREWRITE; it returns the change in held bytes.
func (m *matcher) rollback(r *cdcpb.Event_Row) int {
	k := matchKey{startTs: r.StartTs, key: string(r.Key)}
	p, ok := m.unmatched[k]
	if !ok {
		return 0
	}
	delete(m.unmatched, k)
	freed := len(k.key) + len(p.value) + len(p.oldValue) + 64
	m.bytes -= freed
	return -freed
}
