package logpuller

import (
	"bytes"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"

	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// keyLess compares comparable start keys: empty is -inf.
func startLess(a, b []byte) bool { return bytes.Compare(a, b) < 0 }

// endCompare compares comparable end keys: empty is +inf.
func endCompare(a, b []byte) int {
	switch {
	case len(a) == 0 && len(b) == 0:
		return 0
	case len(a) == 0:
		return 1
	case len(b) == 0:
		return -1
	}
	return bytes.Compare(a, b)
}

// startBeforeEnd reports start < end where end may be +inf.
func startBeforeEnd(start, end []byte) bool {
	return len(end) == 0 || bytes.Compare(start, end) < 0
}

// maxStart returns the larger of two start keys.
func maxStart(a, b []byte) []byte {
	if bytes.Compare(a, b) >= 0 {
		return a
	}
	return b
}

// minEnd returns the smaller of two end keys (empty = +inf).
func minEnd(a, b []byte) []byte {
	if endCompare(a, b) <= 0 {
		return a
	}
	return b
}

// Intersect returns the overlap of two comparable spans and whether it is
// non-empty.
func Intersect(a, b kvevent.Span) (kvevent.Span, bool) {
	s := kvevent.Span{StartKey: maxStart(a.StartKey, b.StartKey), EndKey: minEnd(a.EndKey, b.EndKey)}
	return s, startBeforeEnd(s.StartKey, s.EndKey)
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

func cloneSpan(s kvevent.Span) kvevent.Span {
	return kvevent.Span{StartKey: cloneBytes(s.StartKey), EndKey: cloneBytes(s.EndKey)}
}

// rawBound turns a comparable span bound back into the raw key it encodes,
// so rows (which carry raw keys) can be filtered without encoding each one.
func rawBound(comparable []byte) ([]byte, error) {
	if len(comparable) == 0 {
		return nil, nil
	}
	_, raw, err := codec.DecodeBytes(comparable, nil)
	return raw, err
}
