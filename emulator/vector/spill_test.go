package vector

import (
	"math/rand"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// Rule VEC-Q1: indexes charged to one quota stay within it until a write
// takes the total past the limit; that index then spills (vectors to its
// spill file, graph dropped, builder stopped) and every answer still
// equals the brute-force reference: searches (graph path, exact, filtered,
// SearchKeys), Get, through upserts, replacements and deletes that move
// slots on disk, across page boundaries. A second index charged to the
// same quota spills at once; closing one returns its charge.
func TestSpillPastTheQuotaKeepsResultsExact(t *testing.T) {
	s := seed(t)
	for _, m := range []Metric{Cosine, L2} {
		t.Run(m.String(), func(t *testing.T) {
			r := rand.New(rand.NewSource(s))
			const dim = 16
			dir := t.TempDir()
			// Room for two pages of vectors and the bookkeeping of a
			// few more: the index spills early in its third page.
			quota := NewQuota(2*(pageBytes+4*pageSlots*dim) + 64<<10)
			spills := 0
			x, err := NewWithOptions(dim, m, Options{HNSWThreshold: 500, Eager: true, Quota: quota, SpillDir: dir,
				OnSpill: func(err error) { require.NoError(t, err); spills++ }})
			require.NoError(t, err)
			data := map[string][]float32{}
			check := func(step int) {
				for qi := 0; qi < 5; qi++ {
					q := randVec(r, dim)
					k := 1 + r.Intn(30)
					var filter func(string) bool
					if qi%2 == 1 {
						filter = func(pk string) bool { return len(pk)%2 == 0 }
					}
					got, err := x.SearchFiltered(q, k, filter)
					require.NoError(t, err)
					sameHits(t, bruteForce(m, data, q, k, filter), got, s)
					_, keys, err := x.SearchKeys(q, k, false, filter)
					require.NoError(t, err)
					n := 0
					for pk := range data {
						if filter == nil || filter(pk) {
							n++
						}
					}
					require.Len(t, keys, n, "seed %d step %d: SearchKeys", s, step)
				}
				for i := 0; i < 5; i++ {
					pk := "p" + strconv.Itoa(r.Intn(4000))
					got, ok := x.Get(pk)
					want, had := data[pk]
					require.Equal(t, had, ok, "seed %d step %d: Get(%s)", s, step, pk)
					if had {
						require.InDeltaSlice(t, stored(m, want), got, 1e-6, "seed %d step %d: Get(%s)", s, step, pk)
					}
				}
			}
			spilledAt := -1
			for step := 0; step < 6000; step++ {
				pk := "p" + strconv.Itoa(r.Intn(4000))
				if r.Intn(4) == 0 {
					_, had := data[pk]
					require.Equal(t, had, x.Delete(pk), "seed %d step %d", s, step)
					delete(data, pk)
				} else {
					v := randVec(r, dim)
					require.NoError(t, x.Upsert(pk, v))
					data[pk] = v
				}
				if spilledAt < 0 && x.Spilled() {
					spilledAt = step
					require.False(t, x.UsingHNSW(), "seed %d: a spilled index keeps no graph", s)
				}
				if spilledAt < 0 {
					require.LessOrEqual(t, quota.Used(), quota.Limit(), "seed %d step %d: in memory within the quota", s, step)
				}
				if step%500 == 0 {
					check(step)
				}
			}
			require.GreaterOrEqual(t, spilledAt, 0, "seed %d: never spilled", s)
			require.Equal(t, 1, spills, "seed %d: OnSpill calls", s)
			require.Equal(t, x.Bytes(), quota.Used(), "seed %d: charge", s)
			x.Arm()
			x.WaitGraph()
			require.False(t, x.UsingHNSW(), "seed %d: no graph is built once spilled", s)
			check(-1)
			t.Logf("spilled at step %d; %d live at the end, %d bytes charged", spilledAt, len(data), quota.Used())

			y, err := NewWithOptions(dim, m, Options{Quota: quota, SpillDir: dir})
			require.NoError(t, err)
			for i := 0; !y.Spilled(); i++ {
				require.Less(t, i, 3*pageSlots, "seed %d: a second index charged past the quota never spilled", s)
				require.NoError(t, y.Upsert("y"+strconv.Itoa(i), randVec(r, dim)))
			}
			require.Equal(t, x.Bytes()+y.Bytes(), quota.Used(), "seed %d: both charged", s)
			x.Close()
			require.Equal(t, y.Bytes(), quota.Used(), "seed %d: Close returns the charge", s)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Empty(t, entries, "seed %d: spill files are unlinked at creation", s)
		})
	}
}

// stored is v's stored form (normalized for cosine).
func stored(m Metric, v []float32) []float32 {
	x := &Index{dim: len(v), metric: m}
	out := make([]float32, len(v))
	norm, _ := x.check(func() string { return "" }, v)
	x.store(out, v, norm)
	return out
}
