package normalize

import (
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/upstream/schemastore"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// TestN25DDLScope (rule N25): a DDL reaches only the collections whose
// tables it names; a DDL of a table no collection maps is ignored.
func TestN25DDLScope(t *testing.T) {
	h, _ := twoCollections(t)
	ev, _ := addColumnDDL(h.ti[42], 70, 120, 91, "x", mysql.TypeLong)
	ev.SchemaID, ev.SchemaName = 1, "shop"
	before := len(h.sink.puts)
	h.ddl(ev)
	require.Len(t, h.sink.puts, before+1, "one schema request: shop.items only")
	require.Equal(t, "shop.items", h.sink.puts[before].GetScope().GetCollection())

	other := intPKTable(77, "elsewhere")
	h.ddl(&schemastore.DDLEvent{JobID: 71, Type: int(model.ActionAddColumn), TableID: 77, SchemaID: 3, SchemaName: "misc",
		SchemaVersion: 92, FinishedTs: 130, TableInfo: other, Query: "ALTER TABLE misc.elsewhere ADD COLUMN y INT"})
	require.Len(t, h.sink.puts, before+1, "a DDL of an unmapped table sends nothing")
}

// TestN33RowOfDroppedCollectionIsFatal (rule N33): a row sealed for a
// collection that was dropped is an ordering anomaly, not data.
func TestN33RowOfDroppedCollectionIsFatal(t *testing.T) {
	h, _ := oneTable(t, Config{})
	h.upsert(42, 110, row(1, "a", 0))
	h.ddl(&schemastore.DDLEvent{JobID: 20, Type: int(model.ActionDropTable), TableID: 42, SchemaName: "shop", SchemaVersion: 70, FinishedTs: 120})
	require.NoError(t, h.b.AddRow(h.ctx, RowInput{TableID: 42, CommitTs: 125, RowType: minicdc.RowTypeInsert, Post: row(2, "ghost", 0), TableInfo: mt(h.ti[42])}))
	err := h.b.Checkpoint(h.ctx, map[int64]uint64{42: 130})
	require.Error(t, err, "a row of a dropped table must not be ingested")
	require.ErrorContains(t, err, `collection "shop.items" that is dropped`)
	require.Empty(t, h.sink.liveDocs("shop.items"))
}
