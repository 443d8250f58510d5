// Tests for the seal-driven reorder buffer (specs/normalization.md N8-N14).
package reorder

import (
	"flag"
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var seedFlag = flag.Int64("seed", 0, "seed for randomized tests (0 = time based)")

func testSeed(t *testing.T) int64 {
	s := *seedFlag
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("seed=%d (rerun with -seed=%d)", s, s)
	return s
}

type row struct {
	ts  uint64
	tag string
}

func newBuf(t *testing.T, rows int, bytes int64) *Buffer[row] {
	t.Helper()
	b, err := New[row](Config{Partition: "table:42", MaxUnsealedRows: rows, MaxUnsealedBytes: bytes})
	require.NoError(t, err)
	return b
}

func add(t *testing.T, b *Buffer[row], ts uint64, tag string) {
	t.Helper()
	require.NoError(t, b.Add(ts, 10, row{ts, tag}))
}

func tags(items []Item[row]) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Value.tag
	}
	return out
}

func TestConfigValidate(t *testing.T) {
	_, err := New[row](Config{Partition: "p", MaxUnsealedRows: 0, MaxUnsealedBytes: 1})
	require.ErrorContains(t, err, "MaxUnsealedRows")
	_, err = New[row](Config{Partition: "p", MaxUnsealedRows: 1, MaxUnsealedBytes: 0})
	require.ErrorContains(t, err, "MaxUnsealedBytes")
}

func TestSealByCheckpoint(t *testing.T) {
	b := newBuf(t, 100, 1<<20)
	add(t, b, 10, "a")
	add(t, b, 20, "b")
	add(t, b, 30, "c")
	require.Empty(t, b.Drain(nil), "nothing sealed yet")
	require.NoError(t, b.SealCheckpoint(20))
	require.Equal(t, []string{"a", "b"}, tags(b.Drain(nil)), "resolved_ts >= commit_ts seals")
	rows, bytes := b.Unsealed()
	require.Equal(t, 1, rows)
	require.Equal(t, int64(10), bytes)
	require.NoError(t, b.SealCheckpoint(29))
	require.Empty(t, b.Drain(nil))
	require.NoError(t, b.SealCheckpoint(30))
	require.Equal(t, []string{"c"}, tags(b.Drain(nil)))
	require.Equal(t, 0, b.Len())
}

func TestSealByDDL(t *testing.T) {
	b := newBuf(t, 100, 1<<20)
	add(t, b, 5, "a")
	add(t, b, 7, "b")
	add(t, b, 7, "c")
	add(t, b, 8, "d")
	require.NoError(t, b.SealDDL(7))
	require.Equal(t, []string{"a", "b", "c"}, tags(b.Drain(nil)), "every row with commit_ts <= ddl ts")
	// A checkpoint behind the DDL seal is legal (coalesced) and changes nothing.
	require.NoError(t, b.SealCheckpoint(6))
	require.Empty(t, b.Drain(nil))
	require.Equal(t, uint64(7), b.SealedTs())
}

func TestStableOrderWithinCommitTs(t *testing.T) {
	b := newBuf(t, 100, 1<<20)
	add(t, b, 9, "x1")
	add(t, b, 5, "a1")
	add(t, b, 9, "x2")
	add(t, b, 5, "a2")
	add(t, b, 9, "x3")
	add(t, b, 5, "a3")
	require.NoError(t, b.SealCheckpoint(9))
	got := b.Drain(nil)
	require.Equal(t, []string{"a1", "a2", "a3", "x1", "x2", "x3"}, tags(got))
	for i := 1; i < len(got); i++ {
		if got[i].CommitTs == got[i-1].CommitTs {
			require.Less(t, got[i-1].Ordinal, got[i].Ordinal)
		}
	}
}

func TestOutOfOrderArrivalsComeOutSorted(t *testing.T) {
	b := newBuf(t, 100, 1<<20)
	for _, ts := range []uint64{50, 10, 40, 20, 30, 15, 45} {
		add(t, b, ts, "")
	}
	require.NoError(t, b.SealCheckpoint(42))
	var got []uint64
	for _, it := range b.Drain(nil) {
		got = append(got, it.CommitTs)
	}
	require.Equal(t, []uint64{10, 15, 20, 30, 40}, got)
	// A later out-of-order arrival above the seal still sorts in.
	add(t, b, 43, "")
	require.NoError(t, b.SealCheckpoint(100))
	got = got[:0]
	for _, it := range b.Drain(nil) {
		got = append(got, it.CommitTs)
	}
	require.Equal(t, []uint64{43, 45, 50}, got)
}

func TestRowsBoundEnforced(t *testing.T) {
	b := newBuf(t, 3, 1<<20)
	add(t, b, 1, "a")
	add(t, b, 2, "b")
	add(t, b, 3, "c")
	err := b.Add(4, 10, row{4, "d"})
	var fe *FullError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, BoundRows, fe.Bound)
	require.Equal(t, int64(3), fe.Limit)
	require.Equal(t, 3, fe.UnsealedRows)
	require.Equal(t, "table:42", fe.Partition)
	require.Equal(t, 3, b.Len(), "the rejected row was not added")
	// Under pressure nothing unsealed comes out.
	require.Empty(t, b.Drain(nil))
	// Sealed-but-undrained rows do not count against the bound.
	require.NoError(t, b.SealCheckpoint(1))
	add(t, b, 4, "d")
	require.Equal(t, []string{"a"}, tags(b.Drain(nil)))
}

func TestBytesBoundEnforced(t *testing.T) {
	b := newBuf(t, 100, 25)
	require.NoError(t, b.Add(1, 10, row{}))
	require.NoError(t, b.Add(2, 10, row{}))
	err := b.Add(3, 10, row{})
	var fe *FullError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, BoundBytes, fe.Bound)
	require.Equal(t, int64(20), fe.UnsealedBytes)
	require.Equal(t, int64(10), fe.RowBytes)
	require.False(t, fe.Never)
	require.True(t, b.Fits(5))
	// A row bigger than the bound can never fit.
	require.ErrorAs(t, b.Add(3, 26, row{}), &fe)
	require.True(t, fe.Never)
	require.NoError(t, b.SealCheckpoint(2))
	require.NoError(t, b.Add(3, 25, row{}))
}

func TestLateRowAndSealRegression(t *testing.T) {
	b := newBuf(t, 10, 1000)
	add(t, b, 10, "a")
	require.NoError(t, b.SealCheckpoint(10))
	var le *LateRowError
	require.ErrorAs(t, b.Add(10, 1, row{}), &le)
	require.Equal(t, uint64(10), le.SealedTs)
	require.ErrorAs(t, b.Add(3, 1, row{}), &le)
	var se *SealRegressionError
	require.ErrorAs(t, b.SealCheckpoint(9), &se)
	require.Equal(t, "checkpoint", se.Kind)
	require.NoError(t, b.SealDDL(12))
	require.ErrorAs(t, b.SealDDL(11), &se)
	require.Equal(t, "ddl", se.Kind)
}

func TestDrainN(t *testing.T) {
	b := newBuf(t, 100, 1<<20)
	for i := uint64(1); i <= 5; i++ {
		add(t, b, i, string(rune('a'+i-1)))
	}
	require.NoError(t, b.SealCheckpoint(5))
	require.Equal(t, []string{"a", "b"}, tags(b.DrainN(nil, 2)))
	require.Equal(t, 3, b.Sealed())
	require.Equal(t, []string{"c", "d", "e"}, tags(b.DrainN(nil, 10)))
}

// TestRandomAgainstModel: random arrivals (bounded out-of-order), random
// seals of both kinds, random pressure. Checks against a reference model:
// drained rows are exactly the model's sealed rows in (ts, arrival) order,
// never an unsealed row, and at the end nothing is lost.
func TestRandomAgainstModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 50; round++ {
		maxRows := 1 + rng.Intn(20)
		maxBytes := int64(50 + rng.Intn(200))
		// Small chunks put chunk boundaries inside every seal, sort and drain.
		shift := []uint{0, 1, 2, 3, defaultChunkShift}[rng.Intn(5)]
		b, err := newBuffer[int](Config{Partition: "p", MaxUnsealedRows: maxRows, MaxUnsealedBytes: maxBytes}, shift)
		require.NoError(t, err)
		type mrow struct {
			ts   uint64
			ord  int
			size int64
		}
		var model []mrow // buffered rows, arrival order
		var seal uint64
		var cp, ddl uint64
		ord := 0
		var out []Item[int]
		var all []mrow
		for step := 0; step < 400; step++ {
			switch op := rng.Intn(10); {
			case op < 6: // add
				ts := seal + 1 + uint64(rng.Intn(15))
				size := int64(1 + rng.Intn(30))
				err := b.Add(ts, size, ord)
				var unsealedRows int
				var unsealedBytes int64
				for _, m := range model {
					if m.ts > seal {
						unsealedRows++
						unsealedBytes += m.size
					}
				}
				wantFull := unsealedRows+1 > maxRows || unsealedBytes+size > maxBytes
				if wantFull {
					var fe *FullError
					require.ErrorAs(t, err, &fe, "seed %d round %d step %d", seed, round, step)
					continue
				}
				require.NoError(t, err, "seed %d round %d step %d", seed, round, step)
				model = append(model, mrow{ts, ord, size})
				all = append(all, mrow{ts, ord, size})
				ord++
			case op < 8: // checkpoint seal
				cp += uint64(rng.Intn(8))
				require.NoError(t, b.SealCheckpoint(cp))
				seal = max(seal, cp)
			case op < 9: // ddl seal
				ddl = max(ddl, cp) + uint64(rng.Intn(6))
				require.NoError(t, b.SealDDL(ddl))
				seal = max(seal, ddl)
			default: // drain
				before := len(out)
				out = b.Drain(out)
				var want []mrow
				var keep []mrow
				for _, m := range model {
					if m.ts <= seal {
						want = append(want, m)
					} else {
						keep = append(keep, m)
					}
				}
				model = keep
				sort.SliceStable(want, func(i, j int) bool { return want[i].ts < want[j].ts })
				got := out[before:]
				require.Len(t, got, len(want), "seed %d round %d step %d", seed, round, step)
				for i := range want {
					require.Equal(t, want[i].ts, got[i].CommitTs, "seed %d round %d step %d", seed, round, step)
					require.Equal(t, want[i].ord, got[i].Value, "seed %d round %d step %d", seed, round, step)
					require.LessOrEqual(t, got[i].CommitTs, seal, "unsealed row emitted; seed %d", seed)
				}
			}
		}
		// Final seal: everything comes out exactly once, nothing lost.
		require.NoError(t, b.SealCheckpoint(^uint64(0)))
		out = b.Drain(out)
		require.Len(t, out, len(all), "seed %d round %d: rows lost or duplicated", seed, round)
		seen := make(map[int]bool)
		for _, it := range out {
			require.False(t, seen[it.Value], "seed %d: duplicate", seed)
			seen[it.Value] = true
		}
		require.Equal(t, 0, b.Len())
	}
}

func TestMinUnsealedTsAndCompaction(t *testing.T) {
	b := newBuf(t, 1000, 1<<20)
	_, ok := b.MinUnsealedTs()
	require.False(t, ok)
	add(t, b, 30, "a")
	add(t, b, 10, "b")
	add(t, b, 20, "c")
	m, ok := b.MinUnsealedTs()
	require.True(t, ok)
	require.Equal(t, uint64(10), m)
	require.NoError(t, b.SealCheckpoint(10))
	m, _ = b.MinUnsealedTs()
	require.Equal(t, uint64(20), m)
	// Partial drains followed by adds reuse the array (compaction) and keep order.
	var out []string
	ts := uint64(30)
	for i := 0; i < 500; i++ {
		ts++
		add(t, b, ts, fmt.Sprint(ts))
		if i%3 == 0 {
			require.NoError(t, b.SealCheckpoint(ts-1))
			out = tags(b.DrainN(nil, 1))
			require.Len(t, out, 1)
		}
	}
	require.NoError(t, b.SealCheckpoint(ts))
	rest := b.Drain(nil)
	for i := 1; i < len(rest); i++ {
		require.Less(t, rest[i-1].CommitTs, rest[i].CommitTs)
	}
	require.Equal(t, 0, b.Len())
	require.Equal(t, "table:42", b.Config().Partition)
}

// TestChunksRecycledAndNoGrowth (N9's storage): rows live in fixed chunks
// that drains recycle: once warm, adding, sealing and draining a backlog
// of several chunks (up to maxFreeChunks) allocates nothing, drained
// chunks hold no references, and at most maxFreeChunks are kept.
func TestChunksRecycledAndNoGrowth(t *testing.T) {
	b, err := newBuffer[*int](Config{Partition: "p", MaxUnsealedRows: 1 << 20, MaxUnsealedBytes: 1 << 40}, 2)
	require.NoError(t, err)
	v := new(int)
	dst := make([]Item[*int], 0, 64)
	ts := uint64(1)
	round := func() {
		for i := 0; i < 4*maxFreeChunks-4; i++ { // several chunks
			ts++
			commit := ts
			if i%5 == 2 {
				commit-- // out of order: the seal sorts across chunks
			}
			if err := b.Add(commit, 1, v); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.SealCheckpoint(ts - 3); err != nil {
			t.Fatal(err)
		}
		dst = b.Drain(dst[:0])
	}
	round()
	round()
	require.Equal(t, 0.0, testing.AllocsPerRun(20, round), "a warm buffer allocates nothing")
	require.LessOrEqual(t, len(b.free), maxFreeChunks)
	for _, c := range b.free {
		for _, it := range c[:cap(c)] {
			require.Nil(t, it.Value, "a recycled chunk keeps no payload")
		}
	}
	require.NoError(t, b.SealCheckpoint(ts))
	dst = b.Drain(dst[:0])
	for i := 1; i < len(dst); i++ {
		require.Equal(t, -1, less(dst[i-1], dst[i]), "(commit_ts, ordinal) order at %d", i)
	}
	require.Equal(t, 0, b.Len())
}
