package snapshot

// Splitting ranges by keys (SN14): a table of fewer regions than the
// snapshot's concurrency (a new or small table is one region) would be
// read by fewer workers than there are; its ranges are split at keys
// spread evenly between each range's first and last row at S, so every
// worker reads a part.

import (
	"bytes"
	"context"
	"math/big"

	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// SplitBetween returns up to n-1 keys strictly between lo and hi (lo <
// hi), evenly spaced when both are read as big-endian numbers of one
// length (the longer one's plus a byte, the shorter right-padded with
// zeros), increasing and without duplicates: fewer when the interval has
// no room for them. Pure.
func SplitBetween(lo, hi []byte, n int) [][]byte {
	if n < 2 || bytes.Compare(lo, hi) >= 0 {
		return nil
	}
	l := max(len(lo), len(hi)) + 1
	a := new(big.Int).SetBytes(padRight(lo, l))
	b := new(big.Int).SetBytes(padRight(hi, l))
	span := new(big.Int).Sub(b, a)
	var out [][]byte
	step, p := new(big.Int), new(big.Int)
	for i := 1; i < n; i++ {
		step.Mul(span, big.NewInt(int64(i)))
		step.Quo(step, big.NewInt(int64(n)))
		p.Add(a, step)
		k := p.FillBytes(make([]byte, l))
		if bytes.Compare(k, lo) <= 0 || bytes.Compare(k, hi) >= 0 || (len(out) > 0 && bytes.Equal(k, out[len(out)-1])) {
			continue
		}
		out = append(out, k)
	}
	return out
}

func padRight(k []byte, l int) []byte {
	out := make([]byte, l)
	copy(out, k)
	return out
}

// lastKeyProbes bounds the probes that look for a range's last row (each
// halves the interval that holds it: an int handle's 8 bytes and a byte
// more), and the bisection stops once that interval is below 1/1024 of
// the rows' span.
const lastKeyProbes = 80

// SplitRanges splits ranges (one table's plan, in key order) into about
// want ranges when there are fewer (SN14): each range with rows at ts is
// cut into ceil(want/len(ranges)) parts at keys spread evenly between its
// first row and (about) its last, found by bisection with one-row scans.
// Ranges without rows, or too narrow to cut, stay whole; the result
// covers exactly what ranges covered, in key order.
func SplitRanges(ctx context.Context, rd kvevent.SnapshotReader, ts uint64, ranges []Range, want int) ([]Range, error) {
	if len(ranges) == 0 || len(ranges) >= want {
		return ranges, nil
	}
	parts := (want + len(ranges) - 1) / len(ranges)
	var out []Range
	for _, r := range ranges {
		first, last, above, err := rowBounds(ctx, rd, ts, r)
		if err != nil {
			return nil, err
		}
		var cuts [][]byte
		if first != nil && bytes.Compare(first, last) < 0 {
			cuts = SplitBetween(first, last, parts)
		}
		if len(cuts) == 0 {
			out = append(out, r)
			continue
		}
		start := r.Start
		for _, k := range cuts {
			out = append(out, Range{Start: bytes.Clone(start), End: k, Bound: k})
			start = k
		}
		// No row at or above it: the last part's progress bound.
		out = append(out, Range{Start: bytes.Clone(start), End: bytes.Clone(r.End), Bound: bytes.Clone(above)})
	}
	return out, nil
}

// rowBounds finds r's first row key at ts and (about) its last: last is
// a row's key at or below the last row's, above a key (at most r.End)
// with no row at or after it. first is nil when r has no row at ts, or
// has no end to bisect from.
func rowBounds(ctx context.Context, rd kvevent.SnapshotReader, ts uint64, r Range) (first, last, above []byte, err error) {
	if len(r.End) == 0 {
		return nil, nil, nil, nil
	}
	kvs, err := rd.Scan(ctx, r.Start, r.End, ts, 1)
	if err != nil || len(kvs) == 0 {
		return nil, nil, nil, err
	}
	lo, hi := bytes.Clone(kvs[0].Key), r.End
	first = lo
	for range lastKeyProbes {
		if narrow(first, lo, hi) {
			break
		}
		mid := SplitBetween(lo, hi, 2)
		if len(mid) == 0 {
			break
		}
		kvs, err := rd.Scan(ctx, mid[0], hi, ts, 1)
		if err != nil {
			return nil, nil, nil, err
		}
		if len(kvs) > 0 {
			lo = bytes.Clone(kvs[0].Key)
		} else {
			hi = mid[0]
		}
	}
	return first, lo, hi, nil
}

// narrow reports whether hi - lo is below (lo - first) / 1024, all read as
// numbers of one length.
func narrow(first, lo, hi []byte) bool {
	l := max(len(first), len(lo), len(hi)) + 1
	f := new(big.Int).SetBytes(padRight(first, l))
	a := new(big.Int).SetBytes(padRight(lo, l))
	b := new(big.Int).SetBytes(padRight(hi, l))
	gap := new(big.Int).Sub(b, a)
	span := new(big.Int).Sub(a, f)
	return span.Sign() > 0 && gap.Lsh(gap, 10).Cmp(span) < 0
}

// keyFraction is where key lies between start and bound, from 0 to 1,
// all read as numbers of one length.
func keyFraction(start, key, bound []byte) float64 {
	l := max(len(start), len(key), len(bound)) + 1
	a := new(big.Int).SetBytes(padRight(start, l))
	k := new(big.Int).SetBytes(padRight(key, l))
	b := new(big.Int).SetBytes(padRight(bound, l))
	span := new(big.Float).SetInt(new(big.Int).Sub(b, a))
	if span.Sign() <= 0 {
		return 1
	}
	f, _ := new(big.Float).Quo(new(big.Float).SetInt(new(big.Int).Sub(k, a)), span).Float64()
	return min(max(f, 0), 1)
}
