package normalize

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/upstream/mounter"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// rowCounter is the emulator as a RowSink that counts the batches and
// rows it received positionally.
type rowCounter struct {
	*emulator.Emulator
	batches, rows, enc int
}

func (c *rowCounter) IngestRows(ctx context.Context, b *apiv1.MutationBatch, rows *contract.Rows) (*apiv1.IngestResponse, error) {
	c.batches++
	c.rows += rows.Len()
	c.enc += len(rows.Enc)
	return c.Emulator.IngestRows(ctx, b, rows)
}

// canonicalOnly hides IngestRows: the emulator as any other Sink.
type canonicalOnly struct{ Sink }

// TestE44_BridgeAndSnapshotSendPositionalRows: with the emulator itself as
// sink, the snapshot's and the bridge's batches go positionally (E44);
// through a sink without IngestRows they go canonically; both emulators end
// with the same documents, tombstones and progress, across an ADD COLUMN
// that changes the rows' shape mid-stream.
func TestE44_BridgeAndSnapshotSendPositionalRows(t *testing.T) {
	ctx := context.Background()
	run := func(wrap func(*emulator.Emulator) Sink) (*emulator.Emulator, string) {
		em, err := emulator.Open("", emulator.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = em.Close() })
		sink := wrap(em)
		items, snap := intPKTable(41, "items"), intPKTable(42, "snap")
		tables := []Table{{PhysicalID: 41, SchemaID: 2, Database: "shop", Info: mt(items)}, {PhysicalID: 42, SchemaID: 2, Database: "shop", Info: mt(snap)}}
		roles := map[string]RoleOverrides{"shop.items": {"title": apiv1.FieldRole_FIELD_ROLE_KEYWORD}, "shop.snap": {"title": apiv1.FieldRole_FIELD_ROLE_KEYWORD}}
		br, err := New(Config{ClientID: "e44", StartTs: 100, Tables: tables, MaxBatchRows: 3, Roles: roles}, sink)
		require.NoError(t, err)
		res, err := br.Open(ctx)
		require.NoError(t, err)

		// The snapshot of table 42 at 100, in an epoch of its own (N42).
		st, err := em.GetCollection(ctx, &apiv1.GetCollectionRequest{Name: "shop.snap"})
		require.NoError(t, err)
		p, err := NewSnapshotPartition(sink, SnapshotConfig{Partition: "table:42", Collection: "shop.snap", Epoch: res.Epoch + 1,
			Token: st.GetLineage().GetSchemaGenerationToken(), Ts: 100, Table: mt(snap), PhysicalID: 42, MaxBatchRows: 4})
		require.NoError(t, err)
		rows := snapRowsOf(1, 10)
		ch, err := p.Lower(len(rows), func(i int) (SnapshotRow, error) { return rows[i], nil })
		require.NoError(t, err)
		require.NoError(t, p.Ingest(ctx, ch))
		require.NoError(t, p.Finish(ctx))

		// The stream of table 41: inserts, an update, a delete, then rows
		// of a new shape after ADD COLUMN.
		f := &feeder{t: t, cb: br, m: mounter.New(mounter.Config{RequireOldValue: true})}
		for h := int64(1); h <= 5; h++ {
			f.change(41, items, 110, h, nil, vals(fmt.Sprint("t", h), h))
		}
		f.change(41, items, 111, 2, vals("t2", 2), vals("t2b", 20))
		f.change(41, items, 111, 3, vals("t3", 3), nil)
		require.NoError(t, br.OnCheckpoint(ctx, minicdc.Checkpoint{GlobalResolvedTs: 115, TableResolvedTs: map[int64]uint64{41: 115}}))
		ev, items2 := addColumnDDL(items, 9, 120, 50, "extra", mysql.TypeLong)
		require.NoError(t, br.OnDDL(ctx, ddlOf(ev)))
		withExtra := vals("t6", 6)
		withExtra["extra"] = value.NewIntDatum(9)
		f.change(41, items2, 125, 6, nil, withExtra)
		f.change(41, items2, 125, 1, vals("t1", 1), vals("t1b", 1))
		require.NoError(t, br.OnCheckpoint(ctx, minicdc.Checkpoint{GlobalResolvedTs: 130, TableResolvedTs: map[int64]uint64{41: 130}}))
		return em, docsState(t, em, "shop.items", "shop.snap")
	}
	counter := &rowCounter{}
	_, positional := run(func(em *emulator.Emulator) Sink { counter.Emulator = em; return counter })
	_, canonical := run(func(em *emulator.Emulator) Sink { return canonicalOnly{em} })
	require.Equal(t, canonical, positional)
	require.Contains(t, positional, "shop.items/6 v125")
	require.Contains(t, positional, "shop.snap/10 v100")
	// 10 snapshot rows + 8 stream rows positionally; the one delete went
	// alone in a batch of no values, which goes canonically.
	require.Equal(t, 18, counter.rows, "rows sent positionally")
	// The snapshot's and the bridge's rows went encoded (E96).
	require.Equal(t, 18, counter.enc, "rows sent encoded")
	require.Greater(t, counter.batches, 4)
}

// docsState renders the documents (fields sorted) and progress of colls.
func docsState(t *testing.T, em *emulator.Emulator, colls ...string) string {
	t.Helper()
	ctx := context.Background()
	out := ""
	for _, c := range colls {
		docs, _, err := em.Scan(ctx, c, nil, "", 1000)
		require.NoError(t, err)
		for _, d := range docs {
			names := make([]string, 0, len(d.GetFields()))
			for n := range d.GetFields() {
				names = append(names, n)
			}
			sort.Strings(names)
			out += fmt.Sprintf("%s/%s v%d p=%s", c, d.GetPrimaryKey(), d.GetCommitTs(), d.GetSourcePartition())
			for _, n := range names {
				out += " " + n + "=" + prototext.Format(d.GetFields()[n])
			}
			out += "\n"
		}
		st, err := em.GetCollection(ctx, &apiv1.GetCollectionRequest{Name: c})
		require.NoError(t, err)
		out += fmt.Sprintf("%s safe=%d docs=%d\n", c, st.GetSafeTs(), st.GetDocCount())
	}
	prog, err := em.GetProgress(ctx, &apiv1.GetProgressRequest{})
	require.NoError(t, err)
	for _, p := range prog.GetPartitions() {
		out += prototext.Format(p) + "\n"
	}
	return out
}
