package cdcfeed

import (
	"bytes"
	"fmt"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
)

// rawBound turns a comparable region/span boundary into the raw key with
// the same position in raw order. Empty stays empty (-inf or +inf).
func rawBound(cmp []byte) ([]byte, error) {
	if len(cmp) == 0 {
		return nil, nil
	}
	rest, raw, err := codec.DecodeBytes(cmp, nil)
	if err != nil {
		return nil, fmt.Errorf("cdcfeed: boundary %x is not a comparable key: %w", cmp, err)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("cdcfeed: boundary %x has %d trailing bytes after the comparable key", cmp, len(rest))
	}
	return raw, nil
}

// intersect returns [max(s1,s2), min(e1,e2)) with empty end = +inf, and
// whether it is non-empty.
func intersect(s1, e1, s2, e2 []byte) (s, e []byte, ok bool) {
	s = s1
	if bytes.Compare(s2, s1) > 0 {
		s = s2
	}
	switch {
	case len(e1) == 0:
		e = e2
	case len(e2) == 0:
		e = e1
	case bytes.Compare(e1, e2) < 0:
		e = e1
	default:
		e = e2
	}
	return s, e, len(e) == 0 || bytes.Compare(s, e) < 0
}

func inRange(k, s, e []byte) bool {
	return bytes.Compare(k, s) >= 0 && (len(e) == 0 || bytes.Compare(k, e) < 0)
}
