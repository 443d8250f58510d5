package normalize

import (
	"errors"
	"fmt"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/stretchr/testify/require"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/upstream/schemastore"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// rangeTable is a partitioned intPKTable with the given partition ids.
func rangeTable(id int64, name string, parts ...int64) *model.TableInfo {
	ti := intPKTable(id, name)
	ti.Partition = &model.PartitionInfo{Enable: true, Type: model.PartitionType(1)}
	for i, p := range parts {
		ti.Partition.Definitions = append(ti.Partition.Definitions, model.PartitionDefinition{ID: p, Name: ci(fmt.Sprintf("p%d", i))})
	}
	return ti
}

// twoCollections: shop.items (table 42) and app.events (RANGE, 101, 102).
func twoCollections(t *testing.T) (*harness, *model.TableInfo) {
	events := rangeTable(100, "events", 101, 102)
	sink := newFakeSink()
	h := newHarness(t, sink, Config{Tables: []Table{
		{PhysicalID: 42, SchemaID: 1, Database: "shop", Info: mt(intPKTable(42, "items"))},
		{PhysicalID: 101, SchemaID: 2, Database: "app", Info: mt(events)},
		{PhysicalID: 102, SchemaID: 2, Database: "app", Info: mt(events)},
	}})
	return h, events
}

// TestN34AddPartitionMapsItAndN35ReportsAfterTheGroup: ADD PARTITION sends
// the definition with the new partition (ADDITIVE), flushes and advances
// every partition to the DDL's ts, processes the rest of the FinishedTs
// group, and reports the change at the next later callback.
//
// Rules N32 (the added partition gets no rows in this run: the run stops),
// N36 (the TableSetChangedError's fields), N37 (the restart at T with the
// next epoch).
func TestN34AddPartitionMapsItAndN35ReportsAfterTheGroup(t *testing.T) {
	h, events := twoCollections(t)
	h.upsert(42, 110, row(1, "a", 0))
	h.upsert(101, 111, row(2, "b", 0))
	h.upsert(102, 119, row(3, "c", 0))
	h.upsert(42, 125, row(4, "later", 0)) // above the DDL: stays buffered
	next := rangeTable(100, "events", 101, 102, 103)
	h.ddl(&schemastore.DDLEvent{JobID: 60, Type: int(model.ActionAddTablePartition), TableID: 100, SchemaID: 2, SchemaName: "app",
		SchemaVersion: 90, FinishedTs: 120, TableInfo: next, Query: "ALTER TABLE app.events ADD PARTITION (PARTITION p2 VALUES LESS THAN (300))",
		NeedAddedTables: []schemastore.AddedTable{{SchemaID: 2, TableID: 103}}})
	put := h.sink.puts[len(h.sink.puts)-1]
	require.Equal(t, "app.events", put.GetScope().GetCollection())
	require.Equal(t, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE, put.GetUpdatePolicy())
	require.Equal(t, []string{"table:101", "table:102", "table:103"}, put.GetDefinition().GetSourcePartitions())
	// Every partition, of every collection, flushed and stored at 120.
	for _, p := range []string{"table:42", "table:101", "table:102"} {
		require.Len(t, h.sink.mutationsOf(p), 1, p)
		require.Equal(t, uint64(120), h.sink.parts[p].GetResolvedTs(), p)
	}
	require.Equal(t, uint64(120), h.sink.parts["table:103"].GetResolvedTs(), "E29: the new partition starts at the DDL")
	require.NotNil(t, h.b.PendingTableSetChange())

	// Another DDL of the same FinishedTs group is still applied (N35).
	ev2, _ := addColumnDDL(h.ti[42], 61, 120, 91, "x", mysql.TypeLong)
	ev2.SchemaID, ev2.SchemaName = 1, "shop"
	h.ddl(ev2)
	require.Equal(t, "shop.items", h.sink.puts[len(h.sink.puts)-1].GetScope().GetCollection())

	// A later DDL is not applied: the change is reported instead.
	puts := len(h.sink.puts)
	ev3, _ := addColumnDDL(h.ti[42], 62, 130, 92, "y", mysql.TypeLong)
	err := h.b.DDL(h.ctx, ddlOf(ev3))
	var tsc *TableSetChangedError
	require.ErrorAs(t, err, &tsc)
	require.Len(t, h.sink.puts, puts, "the later DDL is redelivered after the restart")
	require.Equal(t, int64(60), tsc.JobID)
	require.Equal(t, uint64(120), tsc.FinishedTs)
	require.Equal(t, "app.events", tsc.Collection)
	require.Equal(t, []int64{103}, tsc.Added)
	require.Empty(t, tsc.Dropped)
	require.Equal(t, []int64{42, 101, 102, 103}, tsc.NewTableIDs)
	require.Len(t, tsc.Tables, 4)
	for _, tb := range tsc.Tables {
		if tb.PhysicalID == 42 {
			require.Equal(t, "shop.items", tb.Collection)
			continue
		}
		require.Equal(t, "app.events", tb.Collection)
		require.Equal(t, []int64{101, 102, 103}, tb.Info.PhysicalIDs(), "the post-DDL schema")
		require.NotSame(t, next, tb.Info, "an owned copy")
	}
	_ = events

	// The runtime wraps a callback error in a FatalError: errors.As finds it.
	wrapped := &minicdc.FatalError{Trigger: minicdc.TriggerCallback, Ts: 130, Err: fmt.Errorf("OnDDL: %w", err)}
	var got *TableSetChangedError
	require.True(t, errors.As(wrapped, &got))
	require.Same(t, tsc, got)
	// Checkpoints report it too and move nothing.
	require.ErrorAs(t, h.b.Checkpoint(h.ctx, map[int64]uint64{42: 140, 101: 140, 102: 140}), &got)
	require.Equal(t, uint64(120), h.sink.parts["table:42"].GetResolvedTs())

	// The restart: resume at the change's ts with the next epoch; the new
	// partition streams from seq 1, the re-delivered row lands once.
	b2, err := New(Config{ClientID: "adapter-1", StartTs: 200, Tables: tsc.Tables}, h.sink)
	require.NoError(t, err)
	res, err := b2.Open(h.ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(120), res.StartTs)
	require.Equal(t, uint64(2), res.Epoch)
	h2 := &harness{t: t, sink: h.sink, b: b2, ti: map[int64]*model.TableInfo{42: h.ti[42], 103: modelOf(tsc.Tables[3].Info)}, ctx: h.ctx}
	h2.upsert(42, 125, row(4, "later", 0))
	h2.upsert(103, 131, row(5, "new partition", 0))
	h2.checkpoint(map[int64]uint64{42: 140, 101: 140, 102: 140, 103: 140})
	ms := h.sink.mutationsOf("table:103")
	require.Len(t, ms, 1)
	require.Equal(t, uint64(1), ms[0].GetSeq())
	require.Len(t, h.sink.liveDocs("app.events"), 3)
	require.Len(t, h.sink.liveDocs("shop.items"), 2)
}

// TestN34TruncatePartitionReplacesOnlyThatPartition: the truncated
// partition's documents go, the others stay (REBUILD_IN_PLACE, not FULL).
func TestN34TruncatePartitionReplacesOnlyThatPartition(t *testing.T) {
	h, _ := twoCollections(t)
	h.upsert(101, 110, row(1, "a", 0))
	h.upsert(102, 111, row(2, "b", 0))
	next := rangeTable(100, "events", 101, 104)
	h.ddl(&schemastore.DDLEvent{JobID: 70, Type: int(model.ActionTruncateTablePartition), TableID: 100, SchemaID: 2, SchemaName: "app",
		SchemaVersion: 95, FinishedTs: 120, TableInfo: next, NeedDroppedTables: []int64{102},
		NeedAddedTables: []schemastore.AddedTable{{SchemaID: 2, TableID: 104}}})
	put := h.sink.puts[len(h.sink.puts)-1]
	require.Equal(t, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE, put.GetUpdatePolicy())
	require.Equal(t, []string{"table:101", "table:104"}, put.GetDefinition().GetSourcePartitions())
	var tsc *TableSetChangedError
	require.ErrorAs(t, h.b.Checkpoint(h.ctx, map[int64]uint64{42: 130, 101: 130, 102: 130}), &tsc)
	require.Equal(t, []int64{104}, tsc.Added)
	require.Equal(t, []int64{102}, tsc.Dropped)
	require.Equal(t, []int64{42, 101, 104}, tsc.NewTableIDs)
}

// TestN34TruncateTableReportsNewID: the truncated table's new id is the
// collection's partition from then on; its logical id follows.
func TestN34TruncateTableReportsNewID(t *testing.T) {
	h, _ := twoCollections(t)
	newInfo := intPKTable(43, "items")
	h.ddl(&schemastore.DDLEvent{JobID: 80, Type: int(model.ActionTruncateTable), TableID: 42, SchemaID: 1, SchemaName: "shop", SchemaVersion: 99,
		FinishedTs: 120, TableInfo: newInfo, NeedDroppedTables: []int64{42}, NeedAddedTables: []schemastore.AddedTable{{SchemaID: 1, TableID: 43}}})
	var tsc *TableSetChangedError
	require.ErrorAs(t, h.b.Checkpoint(h.ctx, map[int64]uint64{42: 130, 101: 130, 102: 130}), &tsc)
	require.Equal(t, []int64{43}, tsc.Added)
	require.Equal(t, []int64{42}, tsc.Dropped)
	require.Equal(t, []int64{43, 101, 102}, tsc.NewTableIDs)
	require.Equal(t, "shop.items", tsc.Tables[0].Collection)
	require.Equal(t, int64(43), tsc.Tables[0].Info.ID)
	// A DROP of the new id is recognised as this collection's.
	ev := &schemastore.DDLEvent{JobID: 81, Type: int(model.ActionDropTable), TableID: 43, SchemaID: 1, SchemaName: "shop", SchemaVersion: 100, FinishedTs: 150}
	d := ddlOf(ev)
	require.True(t, affects(&d, h.b.collections[1]))
}

// TestN34DropTableIsNotATableSetChange: dropping a whole table retires
// its collection without a restart.
func TestN34DropTableIsNotATableSetChange(t *testing.T) {
	h, _ := twoCollections(t)
	h.ddl(&schemastore.DDLEvent{JobID: 90, Type: int(model.ActionDropTable), TableID: 42, SchemaID: 1, SchemaName: "shop", SchemaVersion: 99,
		FinishedTs: 120, NeedDroppedTables: []int64{42}})
	require.Nil(t, h.b.PendingTableSetChange())
	h.checkpoint(map[int64]uint64{42: 130, 101: 130, 102: 130})
}

// TestN34ExchangePartitionFollowsTheExchangedInID: after EXCHANGE
// PARTITION the partitioned table owns the other table's id; the
// collection maps it and drops the old partition id.
func TestN34ExchangePartitionFollowsTheExchangedInID(t *testing.T) {
	h, _ := twoCollections(t)
	next := rangeTable(100, "events", 101, 555)
	h.ddl(&schemastore.DDLEvent{JobID: 95, Type: int(model.ActionExchangeTablePartition), TableID: 555, SchemaID: 2, SchemaName: "app",
		SchemaVersion: 99, FinishedTs: 120, TableInfo: next, MultipleTableInfos: []*model.TableInfo{next}})
	put := h.sink.puts[len(h.sink.puts)-1]
	require.Equal(t, []string{"table:101", "table:555"}, put.GetDefinition().GetSourcePartitions())
	var tsc *TableSetChangedError
	require.ErrorAs(t, h.b.Checkpoint(h.ctx, map[int64]uint64{42: 130, 101: 130, 102: 130}), &tsc)
	require.Equal(t, []int64{555}, tsc.Added)
	require.Equal(t, []int64{102}, tsc.Dropped)
}
