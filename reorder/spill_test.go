// Tests for the memory quota and spill (specs/minicdc.md RS1-RS6).
package reorder

import (
	"errors"
	"math/rand"
	"sort"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/memquota"
)

// TestRS3_SpillAgainstModel: two partitions share one small memory quota
// and (sometimes) a spill quota; random arrivals (out of order, bursts of
// one commit ts like a big transaction, rows larger than the quota),
// random seals of both kinds, bounded drains and acknowledgements. Against
// an in-memory model: every drain returns exactly the model's sealed rows
// in (commit_ts, arrival) order, the only refusal is a full spill quota,
// the quota never goes past its limit and equals what the buffers hold,
// and at the end every row came out once and every charge is returned.
// rule RS9: half the buffers merge small runs; the drains are unchanged.
func TestRS3_SpillAgainstModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	type mrow struct {
		ts   uint64
		ord  int
		size int64
	}
	var merges uint64
	for round := 0; round < 60; round++ {
		memLimit := int64(100 + rng.Intn(600))
		mem, err := memquota.New("memory-quota", memLimit)
		require.NoError(t, err)
		var disk *memquota.Quota
		if rng.Intn(3) == 0 {
			disk, err = memquota.New("spill-quota", int64(50+rng.Intn(400)))
			require.NoError(t, err)
		}
		shift := []uint{0, 1, 2, defaultChunkShift}[rng.Intn(4)]
		type part struct {
			b        *Buffer[int]
			store    *memStore[int]
			model    []mrow
			seal     uint64
			cp, ddl  uint64
			all, out int
			lastTs   uint64
		}
		parts := make([]*part, 2)
		for i := range parts {
			st := newMemStore[int](int64(5 + rng.Intn(20)))
			cfg := Config{Partition: "p", Memory: mem, Disk: disk}
			if rng.Intn(2) == 0 {
				cfg.MaxUnsealedRows = 1 + rng.Intn(30) // a per-partition bound spills too
			}
			opts := []Option[int]{WithRuns[int](st)}
			if rng.Intn(2) == 0 {
				// RS9: merge small runs often (2-4 runs of < 1-8 rows).
				opts = append(opts, WithRunMerge[int](2+rng.Intn(3), 1+rng.Intn(8)))
			}
			b, err := newBuffer[int](cfg, shift, opts...)
			require.NoError(t, err)
			parts[i] = &part{b: b, store: st, lastTs: 1}
		}
		ord := 0
		for step := 0; step < 600; step++ {
			p := parts[rng.Intn(len(parts))]
			where := func() string {
				return "seed " + itoa(seed) + " round " + itoa(int64(round)) + " step " + itoa(int64(step))
			}
			switch op := rng.Intn(20); {
			case op < 12: // add: mostly in order, bursts at one ts, some jitter
				ts := p.lastTs
				switch rng.Intn(6) {
				case 0:
					ts = p.seal + 1 + uint64(rng.Intn(10))
				case 1:
					ts++
				}
				ts = max(ts, p.seal+1)
				p.lastTs = ts
				size := int64(1 + rng.Intn(40))
				if rng.Intn(25) == 0 {
					size = memLimit + int64(rng.Intn(100)) // never fits memory
				}
				err := p.b.Add(ts, size, ord)
				if err != nil {
					var fe *FullError
					require.ErrorAs(t, err, &fe, where())
					require.Equal(t, BoundSpill, fe.Bound, where())
					require.NotNil(t, disk, "refused without a spill quota: %s", where())
					continue
				}
				p.model = append(p.model, mrow{ts, ord, size})
				p.all++
				ord++
			case op < 15:
				p.cp = max(p.cp, p.seal-min(p.seal, 2)) + uint64(rng.Intn(6))
				require.NoError(t, p.b.SealCheckpoint(p.cp), where())
				p.seal = max(p.seal, p.cp)
			case op < 16:
				p.ddl = max(p.ddl, p.cp) + uint64(rng.Intn(5))
				require.NoError(t, p.b.SealDDL(p.ddl), where())
				p.seal = max(p.seal, p.ddl)
			case op < 19: // bounded drain (rows and bytes)
				n := rng.Intn(8) - 1
				maxBytes := int64(-1)
				if rng.Intn(2) == 0 {
					maxBytes = int64(rng.Intn(120))
				}
				got, err := p.b.TakeUpTo(nil, n, maxBytes)
				require.NoError(t, err, where())
				var want, keep []mrow
				for _, m := range p.model {
					if m.ts <= p.seal {
						want = append(want, m)
					} else {
						keep = append(keep, m)
					}
				}
				sort.SliceStable(want, func(i, j int) bool { return want[i].ts < want[j].ts })
				k, used := 0, int64(0)
				for k < len(want) && (n < 0 || k < n) && (maxBytes < 0 || k == 0 || used+want[k].size <= maxBytes) {
					used += want[k].size
					k++
				}
				keep = append(append([]mrow(nil), want[k:]...), keep...)
				want = want[:k]
				p.model = keep
				require.Len(t, got, len(want), where())
				for i := range want {
					require.Equal(t, want[i].ts, got[i].CommitTs, where())
					require.Equal(t, want[i].ord, got[i].Value, where())
				}
				p.out += len(got)
			default:
				require.NoError(t, p.b.Acknowledge(), where())
			}
			var held int64
			for _, q := range parts {
				held += q.b.Held()
				require.Equal(t, len(q.model), q.b.Len(), "%s: rows held", where())
			}
			require.Equal(t, held, mem.Used(), "%s: quota equals what the buffers hold", where())
			require.LessOrEqual(t, mem.Used(), memLimit, where())
			if disk != nil {
				require.LessOrEqual(t, disk.Used(), disk.Limit(), where())
			}
		}
		for _, p := range parts {
			merges += p.b.Spilled().Merges
			require.NoError(t, p.b.SealCheckpoint(^uint64(0)))
			got, err := p.b.Take(nil, -1)
			require.NoError(t, err)
			p.out += len(got)
			require.Equal(t, p.all, p.out, "seed %d round %d: rows lost or duplicated", seed, round)
			require.NoError(t, p.b.Acknowledge())
			require.Empty(t, p.store.live, "seed %d: runs left after acknowledge", seed)
			require.Empty(t, p.store.open, "seed %d: writers left open", seed)
		}
		require.Zero(t, mem.Used(), "seed %d round %d: memory charge left", seed, round)
		require.Zero(t, disk.Used(), "seed %d round %d: disk charge left", seed, round)
	}
	require.NotZero(t, merges, "seed %d: no run was merged (RS9 untested)", seed)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestRS6_SpillErrorIsSticky: after a run-store failure every call
// returns the same *SpillError, wrapping the store's error.
func TestRS6_SpillErrorIsSticky(t *testing.T) {
	mem, _ := memquota.New("memory-quota", 100)
	st := newMemStore[int](10)
	st.failStage = 2
	b, err := New[int](Config{Partition: "table:9", Memory: mem}, WithRuns[int](st))
	require.NoError(t, err)
	require.NoError(t, b.Add(1, 10, 1))
	require.NoError(t, b.Add(2, 10, 2))
	err = b.Add(3, 10, 3)
	var se *SpillError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "table:9", se.Partition)
	require.ErrorContains(t, err, "no space left on table:9/run-1")
	require.True(t, errors.Is(b.SealCheckpoint(5), err))
	_, terr := b.Take(nil, -1)
	require.Equal(t, err, terr)
	require.Equal(t, err, b.Err())
	require.Empty(t, st.open, "the partial run was aborted")
	// Discard still returns every charge.
	require.NoError(t, b.Discard())
	require.Zero(t, mem.Used())
}

// TestRS1_QuotaZeroRejected: a quota must be positive.
func TestRS1_QuotaZeroRejected(t *testing.T) {
	_, err := memquota.New("memory-quota", 0)
	require.ErrorContains(t, err, "memory-quota = 0 bytes, must be > 0")
	// Without a quota the per-partition bounds stay mandatory (N9).
	_, err = New[int](Config{Partition: "p"})
	require.ErrorContains(t, err, "MaxUnsealedRows")
}
