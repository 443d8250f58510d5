package schemafence

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInvariantChecksHoldUnderRandomOps runs verify after every operation
// of random fence and watermark histories (with -tags invariants the
// operations do this themselves and panic).
func TestInvariantChecksHoldUnderRandomOps(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	ids := []int64{4, 8, 15, 16}
	f, err := NewFence(ids)
	require.NoError(t, err)
	parts := []string{"a", "b", "c"}
	w, err := NewWatermarks(parts, []string{ModalityText, ModalityVector, ModalityMetadataAux})
	require.NoError(t, err)
	mods := w.Modalities()
	for step := 0; step < 2000; step++ {
		id := ids[rng.Intn(len(ids))]
		cur, _ := f.Table(id)
		// Mostly forward, sometimes a regression (an error that must leave
		// the state consistent).
		ts := cur + uint64(rng.Intn(5))
		if rng.Intn(10) == 0 && cur > 0 {
			ts = cur - 1
		}
		_ = f.Advance(id, ts)
		require.NoError(t, f.verify(), "step %d", step)

		m, p := mods[rng.Intn(len(mods))], parts[rng.Intn(len(parts))]
		old, _ := w.PartitionApplied(m, p)
		ts = old + uint64(rng.Intn(5))
		if rng.Intn(10) == 0 && old > 0 {
			ts = old - 1
		}
		_ = w.Advance(m, p, ts)
		if step == 1000 {
			_ = w.AddPartition("d", 0) // below the published values: refused
			s, _ := w.Safe()
			require.NoError(t, w.AddPartition("d", s+1000))
			parts = append(parts, "d")
		}
		require.NoError(t, w.verify(), "step %d", step)
	}
}

// TestInvariantChecksCatchCorruptState: the checks fail on state no
// operation can produce (this tests the checks, not a rule).
func TestInvariantChecksCatchCorruptState(t *testing.T) {
	f, _ := NewFence([]int64{1, 2})
	require.NoError(t, f.Advance(1, 10))
	require.NoError(t, f.Advance(2, 20))
	f.min = 20 // a stale cache: table 1 holds the minimum
	require.ErrorContains(t, f.verify(), "cached fence 20, min over tables 10")
	f.min = 10
	f.missing = 1
	require.ErrorContains(t, f.verify(), "counts 1 tables without progress, 0 have none")

	w, _ := NewWatermarks([]string{"a"}, nil)
	require.NoError(t, w.Advance(ModalityDocument, "a", 10))
	w.vals[ModalityDocument]["a"] = 12 // advanced without publishing
	require.ErrorContains(t, w.verify(), "applied_ts of document published=10 (true), computed=12 (true)")
}
