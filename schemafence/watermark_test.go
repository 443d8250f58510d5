// Tests for applied_ts / safe_ts derivation and monotonic guards
// (specs/emulator-contract.md E51-E53, specs/minicdc.md M39).
package schemafence

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMinTs(t *testing.T) {
	require.Equal(t, uint64(0), MinTs())
	require.Equal(t, uint64(3), MinTs(5, 3, 9))
	require.Equal(t, uint64(7), MinTs(7))
}

func TestMonotonicNeverClamps(t *testing.T) {
	var m Monotonic
	m.What = "checkpoint"
	require.NoError(t, m.Advance("p", 10))
	require.NoError(t, m.Advance("p", 10))
	err := m.Advance("p", 9)
	var re *RegressionError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "checkpoint", re.What)
	require.Equal(t, "p", re.Name)
	v, _ := m.Get("p")
	require.Equal(t, uint64(10), v)
	require.NoError(t, m.Advance("q", 1), "names are independent")
}

func TestWatermarksAppliedIsMinOverPartitions(t *testing.T) {
	w, err := NewWatermarks([]string{"table:1", "table:2"}, nil)
	require.NoError(t, err)
	require.NoError(t, w.Advance(ModalityDocument, "table:1", 100))
	_, ok := w.Applied(ModalityDocument)
	require.False(t, ok, "table:2 has not reported")
	_, ok = w.Safe()
	require.False(t, ok)
	require.NoError(t, w.Advance(ModalityDocument, "table:2", 80))
	a, ok := w.Applied(ModalityDocument)
	require.True(t, ok)
	require.Equal(t, uint64(80), a)
	s, ok := w.Safe()
	require.True(t, ok)
	require.Equal(t, uint64(80), s)
}

func TestWatermarksSafeIsMinOverEnabledModalities(t *testing.T) {
	// Without metadata_aux: it does not hold safe_ts back.
	w, err := NewWatermarks([]string{"p"}, []string{ModalityText, ModalityVector})
	require.NoError(t, err)
	require.Equal(t, []string{"document", "text", "vector"}, w.Modalities())
	require.NoError(t, w.Advance(ModalityDocument, "p", 100))
	require.NoError(t, w.Advance(ModalityText, "p", 90))
	_, ok := w.Safe()
	require.False(t, ok, "vector not reported")
	require.NoError(t, w.Advance(ModalityVector, "p", 95))
	s, _ := w.Safe()
	require.Equal(t, uint64(90), s)
	require.Error(t, w.Advance(ModalityMetadataAux, "p", 1), "metadata_aux not enabled")

	// With metadata_aux: it counts.
	w2, _ := NewWatermarks([]string{"p"}, []string{ModalityMetadataAux})
	require.NoError(t, w2.Advance(ModalityDocument, "p", 100))
	_, ok = w2.Safe()
	require.False(t, ok)
	require.NoError(t, w2.Advance(ModalityMetadataAux, "p", 40))
	s, _ = w2.Safe()
	require.Equal(t, uint64(40), s)
}

func TestWatermarksRegressionIsError(t *testing.T) {
	w, _ := NewWatermarks([]string{"a", "b"}, nil)
	require.NoError(t, w.Advance(ModalityDocument, "a", 10))
	require.NoError(t, w.Advance(ModalityDocument, "b", 20))
	var re *RegressionError
	require.ErrorAs(t, w.Advance(ModalityDocument, "b", 19), &re)
	v, _ := w.PartitionApplied(ModalityDocument, "b")
	require.Equal(t, uint64(20), v, "state unchanged on error")

	// Adding a partition below the published applied_ts would regress it.
	require.ErrorAs(t, w.AddPartition("c", 5), &re)
	require.Equal(t, []string{"a", "b"}, w.Partitions())
	require.NoError(t, w.AddPartition("c", 10))
	a, _ := w.Applied(ModalityDocument)
	require.Equal(t, uint64(10), a)
	require.Error(t, w.Advance(ModalityDocument, "zzz", 10), "unmapped partition")
}

func TestNewWatermarksValidation(t *testing.T) {
	_, err := NewWatermarks(nil, nil)
	require.Error(t, err)
	_, err = NewWatermarks([]string{"a", "a"}, nil)
	require.ErrorContains(t, err, "duplicate")
	_, err = NewWatermarks([]string{"a"}, []string{"images"})
	require.ErrorContains(t, err, "unknown modality")
}

// TestWatermarksRandomAgainstModel advances random partitions/modalities and
// compares with a brute-force min.
func TestWatermarksRandomAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	parts := []string{"p1", "p2", "p3"}
	mods := []string{ModalityDocument, ModalityText, ModalityVector}
	w, _ := NewWatermarks(parts, mods)
	model := map[string]map[string]uint64{}
	for _, m := range mods {
		model[m] = map[string]uint64{}
	}
	lastSafe := uint64(0)
	for step := 0; step < 3000; step++ {
		m := mods[rng.Intn(len(mods))]
		p := parts[rng.Intn(len(parts))]
		ts := model[m][p] + uint64(rng.Intn(4))
		require.NoError(t, w.Advance(m, p, ts), "step %d", step)
		model[m][p] = ts
		safeOK := true
		var safe uint64 = ^uint64(0)
		for _, mm := range mods {
			if len(model[mm]) < len(parts) {
				safeOK = false
				_, ok := w.Applied(mm)
				require.False(t, ok)
				continue
			}
			var a uint64 = ^uint64(0)
			for _, v := range model[mm] {
				a = min(a, v)
			}
			got, ok := w.Applied(mm)
			require.True(t, ok)
			require.Equal(t, a, got, "step %d applied %s", step, mm)
			safe = min(safe, a)
		}
		got, ok := w.Safe()
		require.Equal(t, safeOK, ok)
		if ok {
			require.Equal(t, safe, got, "step %d", step)
			require.GreaterOrEqual(t, got, lastSafe)
			lastSafe = got
		}
	}
}
