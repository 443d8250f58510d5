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
