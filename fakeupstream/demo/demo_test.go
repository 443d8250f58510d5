package demo

import (
	"context"
	"testing"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/stretchr/testify/require"
)

func run(t *testing.T, seed int64, steps int) ([]string, Stats) {
	t.Helper()
	ctx := context.Background()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: seed})
	require.NoError(t, err)
	s, err := sqlfront.New(ctx, c)
	require.NoError(t, err)
	ss := s.NewSession("")
	require.NoError(t, Setup(ctx, ss))
	w := NewWorkload(seed, ss)
	w.DDLEvery = 50
	var st Stats
	for i := 0; i < steps; i++ {
		require.NoError(t, w.Step(ctx, &st), "seed %d step %d", seed, i)
	}
	ts, err := c.CurrentTs(ctx)
	require.NoError(t, err)
	snap, err := sqlfront.ReadTable(ctx, c, Database, "products", ts)
	require.NoError(t, err)
	var rows []string
	for _, r := range snap.Rows {
		rows = append(rows, r.Values[0].String()+":"+r.Values[1].String()+":"+r.Values[4].String())
	}
	return rows, st
}

func TestWorkloadRunsEveryKindAndIsDeterministic(t *testing.T) {
	a, st := run(t, 7, 300)
	require.NotZero(t, st.Inserts)
	require.NotZero(t, st.Updates)
	require.NotZero(t, st.Deletes)
	require.NotZero(t, st.Events)
	require.Equal(t, 6, st.DDLs)
	require.Len(t, a, st.Inserts-st.Deletes)
	b, _ := run(t, 7, 300)
	require.Equal(t, a, b, "same seed, same data")
	c, _ := run(t, 8, 300)
	require.NotEqual(t, a, c)
}

// A restart over a durable upstream: the schema exists, Setup is a no-op,
// and a resumed workload continues (ids above the stored ones, the DDL
// cycle from the current columns) without errors.
func TestResumeOverDurableUpstream(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 3, Dir: dir})
	require.NoError(t, err)
	s, err := sqlfront.Open(ctx, c)
	require.NoError(t, err)
	require.False(t, Exists(s))
	require.NoError(t, Setup(ctx, s.NewSession("")))
	require.True(t, Exists(s))
	w := NewWorkload(3, s.NewSession(""))
	w.DDLEvery = 7
	var st Stats
	for i := 0; i < 50; i++ { // ends with promo added (7 DDLs)
		require.NoError(t, w.Step(ctx, &st), "step %d", i)
	}
	require.NoError(t, c.Close())

	c2, err := fakeupstream.New(fakeupstream.Config{Seed: 3, Dir: dir})
	require.NoError(t, err)
	defer c2.Close()
	s2, err := sqlfront.Open(ctx, c2)
	require.NoError(t, err)
	require.True(t, Exists(s2))
	v := s2.SchemaVersion()
	require.NoError(t, Setup(ctx, s2.NewSession("")))
	require.Equal(t, v, s2.SchemaVersion(), "Setup on an existing schema runs no DDL")
	ts, err := c2.CurrentTs(ctx)
	require.NoError(t, err)
	w2 := NewWorkload(4, s2.NewSession(""))
	w2.DDLEvery = 7
	require.NoError(t, w2.Resume(ctx, s2, ts))
	var st2 Stats
	for i := 0; i < 100; i++ {
		require.NoError(t, w2.Step(ctx, &st2), "resumed step %d", i)
	}
	require.NotZero(t, st2.Inserts)
	require.NotZero(t, st2.DDLs)
}

// TestS24LanesWriteDisjointRows (S24): lanes running at once on their
// own sessions insert only ids of their class, update and delete only
// their own products, and a restart resumes every lane above the stored
// ids from one read.
func TestS24LanesWriteDisjointRows(t *testing.T) {
	ctx := context.Background()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 5})
	require.NoError(t, err)
	s, err := sqlfront.New(ctx, c)
	require.NoError(t, err)
	require.NoError(t, Setup(ctx, s.NewSession("")))
	const lanes = 3
	var ws []*Workload
	for k := 0; k < lanes; k++ {
		w := NewWorkload(int64(10+k), s.NewSession(""))
		w.SetLane(k, lanes)
		w.DDLEvery = 0
		if k == 0 {
			w.DDLEvery = 40
		}
		ws = append(ws, w)
	}
	errs := make(chan error, lanes)
	for _, w := range ws {
		go func(w *Workload) {
			var st Stats
			for i := 0; i < 150; i++ {
				if err := w.Step(ctx, &st); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(w)
	}
	for range ws {
		require.NoError(t, <-errs)
	}
	ts, err := c.CurrentTs(ctx)
	require.NoError(t, err)
	snap, err := sqlfront.ReadTable(ctx, c, Database, "products", ts)
	require.NoError(t, err)
	stored := map[int64]bool{}
	for _, r := range snap.Rows {
		stored[r.Values[0].GetInt64()] = true
	}
	n := 0
	for k, w := range ws {
		for _, id := range w.live {
			require.Equal(t, int64(k), id%lanes, "lane %d holds product %d", k, id)
			require.True(t, stored[id], "lane %d: product %d missing", k, id)
			n++
		}
	}
	require.Equal(t, len(stored), n, "stored products are exactly the lanes' own")

	// Resume: one read, every lane above the highest stored id, in its
	// class, with its own stored products.
	maxID := int64(0)
	for id := range stored {
		maxID = max(maxID, id)
	}
	var rs []*Workload
	for k := 0; k < lanes; k++ {
		w := NewWorkload(int64(20+k), s.NewSession(""))
		w.SetLane(k, lanes)
		rs = append(rs, w)
	}
	require.NoError(t, ResumeLanes(ctx, s, ts, rs))
	for k, w := range rs {
		require.Greater(t, w.nextID, maxID)
		require.LessOrEqual(t, w.nextID, maxID+lanes)
		require.Equal(t, int64(k), w.nextID%lanes)
		require.ElementsMatch(t, ws[k].live, w.live, "lane %d", k)
	}
}
