package snapshot

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand"
	"testing"
	"time"
)

// recKey is an int-handle record key of table 42 (t{42}_r{handle}, both
// ints in TiDB's comparable encoding).
func recKey(h int64) []byte {
	k := []byte{'t'}
	k = binary.BigEndian.AppendUint64(k, uint64(42)^(1<<63))
	k = append(k, '_', 'r')
	return binary.BigEndian.AppendUint64(k, uint64(h)^(1<<63))
}

// recRange is table 42's record range [t42_r, t42_s).
func recRange() Range {
	k := recKey(0)[:11]
	end := append(bytes.Clone(k[:10]), 's')
	return Range{Start: k, End: end}
}

// TestSN14_SplitBetween: the keys are strictly between the bounds,
// increasing, evenly spread, whatever the bounds' lengths.
func TestSN14_SplitBetween(t *testing.T) {
	rng := rand.New(rand.NewSource(14))
	for i := 0; i < 2000; i++ {
		lo := make([]byte, rng.Intn(12))
		hi := make([]byte, rng.Intn(12))
		rng.Read(lo)
		rng.Read(hi)
		if bytes.Compare(lo, hi) > 0 {
			lo, hi = hi, lo
		}
		n := 2 + rng.Intn(8)
		prev := lo
		for _, k := range SplitBetween(lo, hi, n) {
			if bytes.Compare(k, prev) <= 0 || bytes.Compare(k, hi) >= 0 {
				t.Fatalf("SplitBetween(%x, %x, %d): %x not in (%x, %x)", lo, hi, n, k, prev, hi)
			}
			prev = k
		}
	}
	// Between handles 0 and 1000, 4 parts: at 250, 500, 750.
	cuts := SplitBetween(recKey(0), recKey(1000), 4)
	if len(cuts) != 3 {
		t.Fatalf("got %d cuts", len(cuts))
	}
	for i, want := range []int64{250, 500, 750} {
		if !bytes.Equal(cuts[i][:19], recKey(want)) {
			t.Errorf("cut %d = %x, want handle %d's key %x", i, cuts[i], want, recKey(want))
		}
	}
	if SplitBetween(recKey(5), recKey(5), 4) != nil || SplitBetween(recKey(6), recKey(5), 4) != nil {
		t.Error("an empty interval has no cut")
	}
}

// TestSN14_SplitRangesByKeys: a table of one region is split into the
// concurrency's number of ranges, covering it exactly, each holding about
// as many rows; a table of enough ranges and an empty range stay as they
// are.
func TestSN14_SplitRangesByKeys(t *testing.T) {
	ctx := context.Background()
	var keys [][]byte
	for h := int64(1001); h <= 41000; h++ {
		keys = append(keys, recKey(h))
	}
	rd := &memReader{keys: keys}
	whole := recRange()
	rs, err := SplitRanges(ctx, rd, 9, []Range{whole}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 4 {
		t.Fatalf("SN14: one region, concurrency 4: %d ranges, want 4", len(rs))
	}
	st := &State{Version: StateVersion, Ts: 9, Tables: []Table{{Name: "t", PhysicalID: 42, Ranges: rs}}}
	if err := st.Check(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rs[0].Start, whole.Start) || !bytes.Equal(rs[3].End, whole.End) {
		t.Fatalf("the ranges do not cover the table: %x .. %x", rs[0].Start, rs[3].End)
	}
	total := 0
	for i, r := range rs {
		n, err := rd.Scan(ctx, r.Start, r.End, 9, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		if len(n) < 9000 || len(n) > 11000 {
			t.Errorf("SN14: range %d holds %d of 40000 rows, want about 10000", i, len(n))
		}
		total += len(n)
	}
	if total != 40000 {
		t.Fatalf("ranges hold %d rows, want 40000", total)
	}

	// Enough ranges already: unchanged.
	two := []Range{{Start: whole.Start, End: recKey(20000)}, {Start: recKey(20000), End: whole.End}}
	rs, err = SplitRanges(ctx, rd, 9, two, 2)
	if err != nil || len(rs) != 2 {
		t.Fatalf("two ranges, concurrency 2: %d ranges, %v", len(rs), err)
	}
	// An empty range, or one with a single row, stays whole.
	empty := []Range{{Start: recKey(50000), End: whole.End}}
	rs, err = SplitRanges(ctx, rd, 9, empty, 4)
	if err != nil || len(rs) != 1 {
		t.Fatalf("empty range: %d ranges, %v", len(rs), err)
	}
	one := []Range{{Start: recKey(41000), End: whole.End}}
	rs, err = SplitRanges(ctx, rd, 9, one, 4)
	if err != nil || len(rs) != 1 {
		t.Fatalf("one-row range: %d ranges, %v", len(rs), err)
	}
}

// TestSN14_ProgressKnowsETABeforeARangeEnds: the ranges a split makes
// carry a progress bound, so the runner reports an ETA while no range has
// ended yet (SN8), and the parts' bounds lie inside them.
func TestSN14_ProgressKnowsETABeforeARangeEnds(t *testing.T) {
	ctx := context.Background()
	var keys [][]byte
	for h := int64(1); h <= 20000; h++ {
		keys = append(keys, recKey(h))
	}
	rd := &memReader{keys: keys}
	rs, err := SplitRanges(ctx, rd, 9, []Range{recRange()}, 2)
	if err != nil || len(rs) != 2 {
		t.Fatalf("%d ranges, %v", len(rs), err)
	}
	for i, r := range rs {
		if r.Bound == nil || bytes.Compare(r.Bound, r.Start) <= 0 || bytes.Compare(r.Bound, r.End) > 0 {
			t.Fatalf("range %d [%x, %x): bound %x", i, r.Start, r.End, r.Bound)
		}
	}
	if bytes.Compare(rs[1].Bound, recKey(20000)) <= 0 {
		t.Fatalf("the last part's bound %x is not past the last row", rs[1].Bound)
	}
	st := &State{Version: StateVersion, Ts: 9, Epoch: 1, Tables: []Table{{Name: "t", Collection: "t", PhysicalID: 42, Ranges: rs}}}
	prog := &Progress{}
	var eta float64 = -2
	chunks := 0
	err = Run(ctx, st, Config{Reader: rd, Writer: newRec(), Concurrency: 1, ChunkRows: 1000, Progress: prog,
		AfterChunk: func(Task, int) error {
			chunks++
			if chunks == 5 {
				rep := prog.Report(time.Now().Add(time.Second))
				if rep[0].RangesDone != 0 {
					t.Errorf("a range ended after 5 chunks of 1000 of 2 x 10000 rows")
				}
				eta = rep[0].ETASeconds
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if eta <= 0 {
		t.Fatalf("SN8/SN14: ETA %v while the first range was a quarter read, want a time", eta)
	}
}
