package normalize

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize/ddlmap"
	"github.com/searchfabric/sfemu/reorder"
	"github.com/searchfabric/sfemu/upstream/schemastore"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

func TestN1PartitionNaming(t *testing.T) {
	require.Equal(t, "table:42", PartitionName(0, 42))
	require.Equal(t, "keyspace:7/table:42", PartitionName(7, 42))
}

func TestN3CollectionName(t *testing.T) {
	require.Equal(t, "shop.orders", DefaultCollectionName("Shop", "Orders"))
	require.Equal(t, "shop.order_items_", DefaultCollectionName("shop", "order items$"))
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'a'
	}
	require.Len(t, DefaultCollectionName("d", string(long)), 128)
}

func oneTable(t *testing.T, cfg Config) (*harness, string) {
	cfg.Tables = []Table{{PhysicalID: 42, SchemaID: 2, Database: "shop", Info: mt(intPKTable(42, "items"))}}
	h := newHarness(t, newFakeSink(), cfg)
	return h, "table:42"
}

// TestN30BootstrapZeroState: the first generation uses the zero-state tuple.
func TestN30BootstrapZeroState(t *testing.T) {
	h, _ := oneTable(t, Config{KeyspaceID: 0})
	require.Len(t, h.sink.puts, 1)
	p := h.sink.puts[0]
	require.Equal(t, "shop.items", p.GetScope().GetCollection())
	require.Equal(t, uint64(100), p.GetScope().GetDdlCommitTs())
	require.Equal(t, uint64(1), p.GetSchemaVersion())
	require.Equal(t, uint64(0), p.GetFence().GetExpectedPrevSchemaVersion())
	require.Equal(t, apiv1.InitialGenerationToken, p.GetFence().GetSchemaGenerationToken())
	require.True(t, p.GetFence().GetEnforceMonotonicApply())
	require.Equal(t, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION, p.GetUpdatePolicy())
	require.Equal(t, apiv1.ClientKind_CLIENT_KIND_TIDB_DDL_ADAPTER, p.GetMeta().GetClientKind())
	require.Equal(t, "adapter-1", p.GetMeta().GetClientId())
	require.Equal(t, "init/shop.items/100", p.GetMeta().GetIdempotencyKey())
	def := p.GetDefinition()
	require.Equal(t, []string{"id"}, def.GetPrimaryKey())
	require.Equal(t, []string{"table:42"}, def.GetSourcePartitions())
	require.Equal(t, "shop", def.GetSource().GetDatabase())
	require.Equal(t, int64(42), def.GetSource().GetLogicalTableId())
	roles := map[string]apiv1.FieldRole{}
	for _, f := range def.GetFields() {
		roles[f.GetName()] = f.GetRole()
	}
	require.Equal(t, apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY, roles["id"])
	require.Equal(t, apiv1.FieldRole_FIELD_ROLE_TEXT, roles["title"], "VARCHAR(255) is full text (N18)")
	require.Equal(t, apiv1.FieldRole_FIELD_ROLE_NUMERIC, roles["n"])
}

func TestN1KeyspacePartitionInDefinitionAndBatches(t *testing.T) {
	sink := newFakeSink()
	h := newHarness(t, sink, Config{KeyspaceID: 9, Tables: []Table{{PhysicalID: 42, Database: "d", Info: mt(intPKTable(42, "t"))}}})
	h.upsert(42, 110, row(1, "a", 1))
	h.checkpoint(map[int64]uint64{42: 120})
	require.Equal(t, []string{"keyspace:9/table:42"}, sink.puts[0].GetDefinition().GetSourcePartitions())
	require.Equal(t, "keyspace:9/table:42", sink.batches[0].GetSourcePartition())
	require.Equal(t, uint32(9), sink.puts[0].GetDefinition().GetSource().GetKeyspaceId())
}

// TestN2PhysicalPartitions: two partitions of one logical table are two
// source partitions of one collection, with single-partition batches (N21).
func TestN2PhysicalPartitions(t *testing.T) {
	logical := intPKTable(100, "events")
	logical.Partition = &model.PartitionInfo{Enable: true, Definitions: []model.PartitionDefinition{{ID: 101, Name: ci("p0")}, {ID: 102, Name: ci("p1")}}}
	sink := newFakeSink()
	h := newHarness(t, sink, Config{Tables: []Table{
		{PhysicalID: 101, Database: "app", Info: mt(logical)},
		{PhysicalID: 102, Database: "app", Info: mt(logical)},
	}})
	require.Len(t, sink.puts, 1)
	require.Equal(t, []string{"table:101", "table:102"}, sink.puts[0].GetDefinition().GetSourcePartitions())
	require.Equal(t, int64(100), sink.puts[0].GetDefinition().GetSource().GetLogicalTableId())
	h.upsert(101, 110, row(1, "a", 1))
	h.upsert(102, 111, row(2, "b", 2))
	h.upsert(101, 112, row(3, "c", 3))
	h.checkpoint(map[int64]uint64{101: 120, 102: 120})
	require.Len(t, sink.batches, 2)
	got := map[string][]string{}
	for _, b := range sink.batches {
		for _, m := range b.GetMutations() {
			got[b.GetSourcePartition()] = append(got[b.GetSourcePartition()], m.GetPrimaryKey())
		}
		require.Equal(t, uint64(1), b.GetFirstSeq(), "each partition has its own seq")
	}
	require.Equal(t, map[string][]string{"table:101": {"1", "3"}, "table:102": {"2"}}, got)
	require.Len(t, sink.liveDocs("app.events"), 3)
}

// TestN6SeqInCanonicalOrder: callbacks out of commit_ts order get seqs in
// commit_ts order.
func TestN6SeqInCanonicalOrder(t *testing.T) {
	h, part := oneTable(t, Config{})
	h.upsert(42, 130, row(3, "c", 0))
	h.upsert(42, 110, row(1, "a", 0))
	h.upsert(42, 120, row(2, "b", 0))
	require.Empty(t, h.sink.batches, "nothing before a seal (N12)")
	h.checkpoint(map[int64]uint64{42: 125})
	h.checkpoint(map[int64]uint64{42: 140})
	ms := h.sink.mutationsOf(part)
	require.Len(t, ms, 3)
	for i, m := range ms {
		require.Equal(t, uint64(i+1), m.GetSeq())
		require.Equal(t, uint64(110+10*i), m.GetCommitTs())
	}
	require.Equal(t, uint64(3), h.sink.batches[1].GetFirstSeq(), "second batch continues the seq")
	// Progress moved only after the batches (N22).
	require.Equal(t, []string{"put:shop.items", "ingest:table:42", "adv:table:42", "ingest:table:42", "adv:table:42"}, h.sink.calls)
	require.Equal(t, uint64(140), h.sink.advs[1].GetResolvedTs())
}

// TestN8StableTieBreak: equal commit_ts keeps callback order.
func TestN8StableTieBreak(t *testing.T) {
	h, part := oneTable(t, Config{})
	h.upsert(42, 111, row(9, "z", 0))
	for _, id := range []int64{5, 3, 8, 1} {
		h.upsert(42, 110, row(id, "x", 0))
	}
	h.checkpoint(map[int64]uint64{42: 111})
	var keys []string
	for _, m := range h.sink.mutationsOf(part) {
		keys = append(keys, m.GetPrimaryKey())
	}
	require.Equal(t, []string{"5", "3", "8", "1", "9"}, keys)
}

func addColumnDDL(ti *model.TableInfo, jobID int64, ts uint64, schemaVersion int64, name string, tp byte) (*schemastore.DDLEvent, *model.TableInfo) {
	next := *ti
	next.Columns = append(append([]*model.ColumnInfo(nil), ti.Columns...), column(int64(len(ti.Columns)+1), len(ti.Columns), colDef{name: name, tp: tp}))
	next.MaxColumnID++
	next.UpdateTS = ts
	return &schemastore.DDLEvent{JobID: jobID, Type: int(model.ActionAddColumn), SchemaName: "shop", TableName: ti.Name.O,
		TableID: ti.ID, SchemaVersion: schemaVersion, FinishedTs: ts, TableInfo: &next}, &next
}

// TestN11DDLSealFlushesExactlyAtOrBelow: OnDDL(T) ingests rows <= T (old
// generation) before the schema request; rows above T wait and then use the
// new generation (N29).
func TestN11DDLSealFlushesExactlyAtOrBelow(t *testing.T) {
	h, part := oneTable(t, Config{})
	h.upsert(42, 110, row(1, "a", 0))
	h.upsert(42, 120, row(2, "b", 0))
	ev, next := addColumnDDL(h.ti[42], 7, 120, 50, "extra", mysql.TypeLong)
	// A row above T decoded with the new schema arrives before the DDL.
	h.ti[42] = next
	r := row(3, "c", 0)
	r[3] = value.NewIntDatum(77)
	h.upsert(42, 121, r)
	h.sink.calls = nil
	h.ddl(ev)
	// Flush, schema change, then progress at T (N26: a resume at T must
	// not be possible before the schema change at T is acknowledged).
	require.Equal(t, []string{"ingest:table:42", "put:shop.items", "adv:table:42"}, h.sink.calls)
	ms := h.sink.mutationsOf(part)
	require.Len(t, ms, 2)
	require.Equal(t, uint64(120), ms[1].GetCommitTs())
	require.Equal(t, uint64(120), h.sink.advs[0].GetResolvedTs(), "progress advanced to T after the flush and the schema change")
	oldToken := h.sink.batches[0].GetSchemaGenerationToken()
	put := h.sink.puts[1]
	require.Equal(t, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE, put.GetUpdatePolicy())
	require.Equal(t, "ddl/7/120/shop.items", put.GetMeta().GetIdempotencyKey())
	require.Equal(t, uint64(120), put.GetScope().GetDdlCommitTs())
	require.Equal(t, uint64(50), put.GetSchemaVersion())
	require.Equal(t, uint64(1), put.GetFence().GetExpectedPrevSchemaVersion(), "fence from the pre-DDL lineage")
	require.Equal(t, oldToken, put.GetFence().GetSchemaGenerationToken())
	require.Len(t, put.GetDefinition().GetFields(), 4)

	h.checkpoint(map[int64]uint64{42: 130})
	ms = h.sink.mutationsOf(part)
	require.Len(t, ms, 3)
	last := h.sink.batches[len(h.sink.batches)-1]
	require.NotEqual(t, oldToken, last.GetSchemaGenerationToken(), "new generation token after the DDL (N29)")
	require.Equal(t, uint64(3), last.GetFirstSeq(), "DDL does not reset seq or epoch")
	require.Equal(t, uint64(1), last.GetSourceEpoch())
	require.Equal(t, int64(77), ms[2].GetFields()["extra"].GetInt64Value())
}

func TestN21BatchCutBySize(t *testing.T) {
	h, _ := oneTable(t, Config{MaxBatchRows: 2})
	for i := int64(1); i <= 5; i++ {
		h.upsert(42, 100+uint64(i), row(i, "x", i))
	}
	h.checkpoint(map[int64]uint64{42: 200})
	var sizes []int
	var firsts []uint64
	for _, b := range h.sink.batches {
		sizes = append(sizes, len(b.GetMutations()))
		firsts = append(firsts, b.GetFirstSeq())
	}
	require.Equal(t, []int{2, 2, 1}, sizes)
	require.Equal(t, []uint64{1, 3, 5}, firsts)
}

func TestN21CutPointsAtGenerationChange(t *testing.T) {
	gens := []string{"a", "a", "a", "b", "b", "c", "c", "c", "c"}
	got := cutPoints(len(gens), 3, 0, nil, func(i int) string { return gens[i] }, nil)
	require.Equal(t, []int{3, 5, 8, 9}, got)
	require.Empty(t, cutPoints(0, 3, 0, nil, func(int) string { return "" }, nil))
}

// TestN27PolicyClassification is the classification table.
func TestN27PolicyClassification(t *testing.T) {
	f := func(name string, tp apiv1.FieldType, role apiv1.FieldRole) *apiv1.Field {
		return &apiv1.Field{Name: name, Type: tp, Role: role}
	}
	base := func() *apiv1.CollectionDefinition {
		return &apiv1.CollectionDefinition{
			Name: "c", PrimaryKey: []string{"id"}, SourcePartitions: []string{"table:1", "table:2"},
			Fields: []*apiv1.Field{
				f("id", apiv1.FieldType_FIELD_TYPE_INT, apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY),
				f("title", apiv1.FieldType_FIELD_TYPE_STRING, apiv1.FieldRole_FIELD_ROLE_TEXT),
			},
		}
	}
	const (
		add  = apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE
		inpl = apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE
		full = apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_FULL
		drop = apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_DROP
		ini  = apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION
	)
	cases := []struct {
		name   string
		action model.ActionType
		mutate func(d *apiv1.CollectionDefinition)
		first  bool
		want   apiv1.SchemaUpdatePolicy
	}{
		{"first generation", model.ActionCreateTable, nil, true, ini},
		{"no visible change (add index)", model.ActionAddIndex, func(d *apiv1.CollectionDefinition) {}, false, add},
		{"add column", model.ActionAddColumn, func(d *apiv1.CollectionDefinition) {
			d.Fields = append(d.Fields, f("n", apiv1.FieldType_FIELD_TYPE_INT, apiv1.FieldRole_FIELD_ROLE_NUMERIC))
		}, false, add},
		{"rename table (source metadata)", model.ActionRenameTable, func(d *apiv1.CollectionDefinition) {
			d.Source = &apiv1.SourceTable{Table: "new"}
		}, false, add},
		{"partition added", model.ActionAddTablePartition, func(d *apiv1.CollectionDefinition) {
			d.SourcePartitions = append(d.SourcePartitions, "table:3")
		}, false, add},
		{"drop column", model.ActionDropColumn, func(d *apiv1.CollectionDefinition) { d.Fields = d.Fields[:1] }, false, inpl},
		{"modify column type", model.ActionModifyColumn, func(d *apiv1.CollectionDefinition) {
			d.Fields[1].Type = apiv1.FieldType_FIELD_TYPE_BYTES
		}, false, inpl},
		{"role change", model.ActionModifyColumn, func(d *apiv1.CollectionDefinition) {
			d.Fields[1].Role = apiv1.FieldRole_FIELD_ROLE_KEYWORD
		}, false, inpl},
		{"partition removed", model.ActionDropTablePartition, func(d *apiv1.CollectionDefinition) {
			d.SourcePartitions = d.SourcePartitions[:1]
		}, false, inpl},
		{"primary key changed", model.ActionAddPrimaryKey, func(d *apiv1.CollectionDefinition) {
			d.PrimaryKey = []string{"title"}
		}, false, full},
		{"key type changed", model.ActionModifyColumn, func(d *apiv1.CollectionDefinition) {
			d.Fields[0].Type = apiv1.FieldType_FIELD_TYPE_UINT
		}, false, full},
		{"truncate table", model.ActionTruncateTable, func(d *apiv1.CollectionDefinition) {}, false, full},
		{"truncate partition (old id replaced, N34)", model.ActionTruncateTablePartition, func(d *apiv1.CollectionDefinition) {
			d.SourcePartitions = []string{"table:1", "table:9"}
		}, false, inpl},
		{"drop table", model.ActionDropTable, nil, false, drop},
		{"drop database", model.ActionDropSchema, nil, false, drop},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var old *apiv1.CollectionDefinition
			if !c.first {
				old = base()
			}
			next := base()
			if c.mutate != nil {
				c.mutate(next)
			}
			require.Equal(t, c.want, ddlmap.Classify(minicdc.DDLAction(c.action), false, old, next))
		})
	}
	require.Equal(t, drop, ddlmap.Classify(minicdc.DDLAction(model.ActionDropTablePartition), true, base(), base()), "every partition dropped")
}

// TestN28ReplayedDDLIsIdentical: a DDL re-delivered after a failed send
// produces the byte-identical request with the same idempotency key.
func TestN28ReplayedDDLIsIdentical(t *testing.T) {
	h, _ := oneTable(t, Config{})
	ev, _ := addColumnDDL(h.ti[42], 9, 150, 60, "extra", mysql.TypeLong)
	h.sink.failPut = 1
	require.Error(t, h.b.DDL(h.ctx, ddlOf(ev)))
	h.ddl(ev)
	require.Len(t, h.sink.puts, 3)
	require.True(t, proto.Equal(h.sink.puts[1], h.sink.puts[2]), "replayed request must be identical")
	// Building it again from scratch from the same pre-DDL lineage is
	// identical too (a pure function of the event and lineage).
	coll := h.b.collections[0]
	coll.version, coll.token = h.sink.puts[1].GetFence().GetExpectedPrevSchemaVersion(), h.sink.puts[1].GetFence().GetSchemaGenerationToken()
	coll.def = h.sink.puts[0].GetDefinition()
	d := ddlOf(ev)
	again, _, _, err := h.b.schemaRequest(&d, coll)
	require.NoError(t, err)
	require.True(t, proto.Equal(h.sink.puts[1], again))
}

// TestN28AlreadyAppliedDDLAfterRestart: a restarted bridge does not resend
// a DDL at or below the collection's last ddl_commit_ts.
func TestN28AlreadyAppliedDDLAfterRestart(t *testing.T) {
	sink := newFakeSink()
	tables := []Table{{PhysicalID: 42, Database: "shop", Info: mt(intPKTable(42, "items"))}}
	h := newHarness(t, sink, Config{Tables: tables})
	ev, next := addColumnDDL(h.ti[42], 9, 150, 60, "extra", mysql.TypeLong)
	h.ddl(ev)
	nPuts := len(sink.puts)
	h2 := newHarness(t, sink, Config{Tables: []Table{{PhysicalID: 42, Database: "shop", Info: mt(next)}}, StartTs: 150})
	h2.ddl(ev)
	require.Len(t, sink.puts, nPuts, "no request for an applied DDL")
}

// TestN27DropAndRecreateUsesZeroState: after DROP, a DDL that brings the
// table back is INITIAL_CREATION with the zero-state tuple, and the
// partition restarts at seq 1.
func TestN27DropAndRecreateUsesZeroState(t *testing.T) {
	h, part := oneTable(t, Config{})
	h.upsert(42, 110, row(1, "a", 0))
	h.checkpoint(map[int64]uint64{42: 115})
	h.ddl(&schemastore.DDLEvent{JobID: 20, Type: int(model.ActionDropTable), TableID: 42, SchemaName: "shop", SchemaVersion: 70, FinishedTs: 120})
	drop := h.sink.puts[len(h.sink.puts)-1]
	require.Equal(t, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_DROP, drop.GetUpdatePolicy())
	require.Equal(t, uint64(70), drop.GetSchemaVersion())
	require.Equal(t, uint64(1), drop.GetFence().GetExpectedPrevSchemaVersion())
	h.checkpoint(map[int64]uint64{42: 125}) // nothing to advance for a dropped collection
	h.ddl(&schemastore.DDLEvent{JobID: 21, Type: int(model.ActionRecoverTable), TableID: 42, SchemaName: "shop", SchemaVersion: 71, FinishedTs: 130, TableInfo: h.ti[42]})
	rec := h.sink.puts[len(h.sink.puts)-1]
	require.Equal(t, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION, rec.GetUpdatePolicy())
	require.Equal(t, uint64(1), rec.GetSchemaVersion())
	require.Equal(t, apiv1.InitialGenerationToken, rec.GetFence().GetSchemaGenerationToken())
	require.Equal(t, uint64(0), rec.GetFence().GetExpectedPrevSchemaVersion())
	h.upsert(42, 140, row(2, "b", 0))
	h.checkpoint(map[int64]uint64{42: 150})
	ms := h.sink.mutationsOf(part)
	require.Equal(t, uint64(1), ms[len(ms)-1].GetSeq())
	require.Len(t, h.sink.liveDocs("shop.items"), 1)
}

// TestN27TruncateIsRebuildFull: the truncated table's new id replaces the
// old partition in the definition (N34), the documents go (REBUILD_FULL).
func TestN27TruncateIsRebuildFull(t *testing.T) {
	h, _ := oneTable(t, Config{})
	h.upsert(42, 110, row(1, "a", 0))
	h.checkpoint(map[int64]uint64{42: 115})
	newInfo := *h.ti[42]
	newInfo.ID = 43
	h.ddl(&schemastore.DDLEvent{JobID: 30, Type: int(model.ActionTruncateTable), TableID: 42, SchemaName: "shop", SchemaVersion: 80,
		FinishedTs: 120, TableInfo: &newInfo, NeedDroppedTables: []int64{42}, NeedAddedTables: []schemastore.AddedTable{{TableID: 43}}})
	put := h.sink.puts[len(h.sink.puts)-1]
	require.Equal(t, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_FULL, put.GetUpdatePolicy())
	require.Equal(t, []string{"table:43"}, put.GetDefinition().GetSourcePartitions())
	require.Equal(t, int64(43), put.GetDefinition().GetSource().GetLogicalTableId())
	require.Empty(t, h.sink.liveDocs("shop.items"))
}

// TestN12NoEarlyEmissionUnderPressureAndN13Overflow: a full buffer blocks
// the row path, emits nothing, and fails after the window.
func TestN12NoEarlyEmissionUnderPressureAndN13Overflow(t *testing.T) {
	tm := &chanTimer{fire: make(chan time.Time, 1), armed: make(chan time.Duration, 4)}
	h, _ := oneTable(t, Config{MaxUnsealedRows: 3, BackpressureWindow: 2 * time.Second, Timer: tm})
	for i := int64(1); i <= 3; i++ {
		h.upsert(42, 110+uint64(i), row(i, "x", 0))
	}
	done := make(chan error, 1)
	go func() {
		done <- h.b.AddRow(context.Background(), RowInput{TableID: 42, CommitTs: 120, RowType: minicdc.RowTypeInsert, Post: row(4, "x", 0), TableInfo: mt(h.ti[42])})
	}()
	require.Equal(t, 2*time.Second, <-tm.armed)
	require.Empty(t, h.sink.batches, "no unsealed row emitted under pressure")
	tm.fire <- time.Time{}
	err := <-done
	require.True(t, errors.Is(err, ErrReorderOverflow), "got %v", err)
	require.True(t, errors.Is(err, minicdc.ErrReorderOverflow), "the runtime must see its own sentinel (M14)")
	var oe *reorder.OverflowError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "table:42", oe.Partition)
	require.Equal(t, reorder.BoundRows, oe.Bound)
	require.Empty(t, h.sink.batches)
	// Nothing dropped: a later seal releases the three buffered rows.
	h.checkpoint(map[int64]uint64{42: 200})
	require.Len(t, h.sink.mutationsOf("table:42"), 3)
}

func TestN13SealDuringBackpressureAdmitsRow(t *testing.T) {
	tm := &chanTimer{fire: make(chan time.Time, 1), armed: make(chan time.Duration, 4)}
	h, _ := oneTable(t, Config{MaxUnsealedRows: 1, BackpressureWindow: time.Second, Timer: tm})
	h.upsert(42, 110, row(1, "x", 0))
	done := make(chan error, 1)
	go func() {
		done <- h.b.AddRow(context.Background(), RowInput{TableID: 42, CommitTs: 120, RowType: minicdc.RowTypeInsert, Post: row(2, "x", 0), TableInfo: mt(h.ti[42])})
	}()
	<-tm.armed
	h.checkpoint(map[int64]uint64{42: 115})
	require.NoError(t, <-done)
	h.checkpoint(map[int64]uint64{42: 130})
	require.Len(t, h.sink.mutationsOf("table:42"), 2)
}

type chanTimer struct {
	fire  chan time.Time
	armed chan time.Duration
}

func (c *chanTimer) After(d time.Duration) <-chan time.Time {
	c.armed <- d
	return c.fire
}

// TestN4EpochBumpAndN31Resume: a restart resumes from stored progress with
// epoch+1, persists the epoch (N5), skips acknowledged rows (N20) and
// restarts seqs at 1.
func TestN4EpochBumpAndN31Resume(t *testing.T) {
	sink := newFakeSink()
	tables := []Table{
		{PhysicalID: 42, Database: "shop", Info: mt(intPKTable(42, "items"))},
		{PhysicalID: 43, Database: "shop", Info: mt(intPKTable(43, "users"))},
	}
	h := newHarness(t, sink, Config{Tables: tables})
	require.Equal(t, uint64(1), h.b.Resume().Epoch, "first start is epoch 1")
	h.upsert(42, 110, row(1, "a", 0))
	h.upsert(43, 111, row(1, "u", 0))
	h.checkpoint(map[int64]uint64{42: 150, 43: 130})
	require.Equal(t, uint64(1), sink.batches[0].GetSourceEpoch())

	res, err := ResumePoint(context.Background(), sink, []string{"table:42", "table:43"}, 100)
	require.NoError(t, err)
	require.Equal(t, uint64(130), res.StartTs, "min stored resolved ts")
	require.Equal(t, uint64(2), res.Epoch)

	h2 := newHarness(t, sink, Config{Tables: tables, StartTs: res.StartTs})
	require.Equal(t, uint64(2), h2.b.Resume().Epoch)
	for _, p := range []string{"table:42", "table:43"} {
		require.Equal(t, uint64(2), sink.parts[p].GetSourceEpoch(), "epoch persisted at open (N5)")
	}
	require.Len(t, sink.puts, 2, "existing collections are not recreated")
	// Redelivered rows at or below the stored resolved ts are skipped.
	h2.upsert(42, 140, row(1, "a-old", 0)) // <= 150 stored for table:42
	h2.upsert(43, 140, row(2, "v", 0))     // > 130 stored for table:43
	h2.checkpoint(map[int64]uint64{42: 140, 43: 140})
	last := sink.batches[len(sink.batches)-1]
	require.Equal(t, "table:43", last.GetSourcePartition())
	require.Equal(t, uint64(2), last.GetSourceEpoch())
	require.Equal(t, uint64(1), last.GetFirstSeq(), "seq restarts at 1 in the new epoch")
	require.Len(t, sink.mutationsOf("table:42"), 1, "acknowledged row not re-sent")
	// A checkpoint below the stored value sends no progress (N23).
	for _, a := range sink.advs {
		if a.GetSourcePartition() == "table:42" && a.GetSourceEpoch() == 2 {
			require.Equal(t, uint64(150), a.GetResolvedTs())
		}
	}
	// A third start takes epoch 3 even though no data was sent in epoch 2 for table:42.
	res, err = ResumePoint(context.Background(), sink, []string{"table:42", "table:43"}, 100)
	require.NoError(t, err)
	require.Equal(t, uint64(3), res.Epoch)
	require.Equal(t, uint64(140), res.StartTs)
}

func TestN23CheckpointRegressionIsFatal(t *testing.T) {
	h, _ := oneTable(t, Config{})
	h.checkpoint(map[int64]uint64{42: 150})
	err := h.b.Checkpoint(h.ctx, map[int64]uint64{42: 149})
	var re *CheckpointRegressionError
	require.ErrorAs(t, err, &re)
	require.Equal(t, uint64(150), re.Old)
	require.Error(t, h.b.Checkpoint(h.ctx, map[int64]uint64{99: 1}), "unknown table")
}

func TestN14LateRowIsFatal(t *testing.T) {
	h, _ := oneTable(t, Config{})
	h.checkpoint(map[int64]uint64{42: 150})
	err := h.b.AddRow(h.ctx, RowInput{TableID: 42, CommitTs: 150, RowType: minicdc.RowTypeInsert, Post: row(1, "a", 0), TableInfo: mt(h.ti[42])})
	var le *reorder.LateRowError
	require.ErrorAs(t, err, &le)
}

// TestN15UpdateWithKeyChange: delete old key, then upsert new key.
func TestN15UpdateWithKeyChange(t *testing.T) {
	h, part := oneTable(t, Config{})
	h.upsert(42, 110, row(1, "a", 0))
	require.NoError(t, h.b.AddRow(h.ctx, RowInput{TableID: 42, CommitTs: 120, RowType: minicdc.RowTypeUpdate,
		Pre: row(1, "a", 0), Post: row(2, "a", 0), TableInfo: mt(h.ti[42])}))
	require.NoError(t, h.b.AddRow(h.ctx, RowInput{TableID: 42, CommitTs: 130, RowType: minicdc.RowTypeUpdate,
		Pre: row(2, "a", 0), Post: row(2, "b", 5), TableInfo: mt(h.ti[42])}))
	h.checkpoint(map[int64]uint64{42: 140})
	var got []string
	for _, m := range h.sink.mutationsOf(part) {
		got = append(got, m.GetKind().String()+":"+m.GetPrimaryKey())
	}
	require.Equal(t, []string{"MUTATION_KIND_UPSERT:1", "MUTATION_KIND_DELETE:1", "MUTATION_KIND_UPSERT:2", "MUTATION_KIND_UPSERT:2"}, got)
	docs := h.sink.liveDocs("shop.items")
	require.Len(t, docs, 1)
	require.Equal(t, "b", docs["2"].GetFields()["title"].GetStringValue())
}

// TestN15RowsOutliveBorrowedBuffers: the bridge copies the bytes; mutating
// the source buffer after the callback changes nothing.
func TestN15RowsOutliveBorrowedBuffers(t *testing.T) {
	h, part := oneTable(t, Config{})
	buf := []byte("hello")
	r := fakeRow{0: value.NewIntDatum(1), 1: value.NewStringDatumBytes(buf), 2: value.NewNullDatum()}
	h.upsert(42, 110, r)
	copy(buf, "XXXXX")
	h.checkpoint(map[int64]uint64{42: 120})
	m := h.sink.mutationsOf(part)[0]
	require.Equal(t, "hello", m.GetFields()["title"].GetStringValue())
	require.True(t, m.GetFields()["n"].GetNullValue())
}

func TestN16RowIDTableAndDeleteWithoutOldImage(t *testing.T) {
	ti := &model.TableInfo{ID: 50, Name: ci("logs"), State: model.StatePublic}
	ti.Columns = []*model.ColumnInfo{column(1, 0, colDef{name: "msg", tp: mysql.TypeBlob, flen: 65535})}
	sink := newFakeSink()
	h := newHarness(t, sink, Config{Tables: []Table{{PhysicalID: 50, Database: "d", Info: mt(ti)}}})
	def := sink.puts[0].GetDefinition()
	require.Equal(t, []string{RowIDField}, def.GetPrimaryKey())
	key := recordKey(50, 77)
	require.NoError(t, h.b.AddRow(h.ctx, RowInput{TableID: 50, CommitTs: 110, RowType: minicdc.RowTypeInsert,
		Post: fakeRow{0: value.NewStringDatum("boot")}, RowKey: key, TableInfo: mt(ti)}))
	require.NoError(t, h.b.AddRow(h.ctx, RowInput{TableID: 50, CommitTs: 111, RowType: minicdc.RowTypeDelete, RowKey: key, TableInfo: mt(ti)}))
	h.checkpoint(map[int64]uint64{50: 120})
	ms := sink.mutationsOf("table:50")
	require.Equal(t, "77", ms[0].GetPrimaryKey())
	require.Equal(t, int64(77), ms[0].GetFields()[RowIDField].GetInt64Value())
	require.Equal(t, apiv1.MutationKind_MUTATION_KIND_DELETE, ms[1].GetKind())
	require.Equal(t, "77", ms[1].GetPrimaryKey())
	// Keyspace-prefixed key, negative handle.
	h2, err := rowIDFromKey(append([]byte{'x', 0, 0, 1}, recordKey(50, -5)...))
	require.NoError(t, err)
	require.Equal(t, int64(-5), h2)
	_, err = rowIDFromKey([]byte("short"))
	require.Error(t, err)
}

func recordKey(table, handle int64) []byte {
	k := []byte{'t'}
	k = appendCmpInt(k, table)
	k = append(k, '_', 'r')
	return appendCmpInt(k, handle)
}

func appendCmpInt(b []byte, v int64) []byte {
	u := uint64(v) ^ (1 << 63)
	return append(b, byte(u>>56), byte(u>>48), byte(u>>40), byte(u>>32), byte(u>>24), byte(u>>16), byte(u>>8), byte(u))
}

// TestN19CompositeKeyMatchesContract compares the bridge's key with the
// contract helper on awkward values.
func TestN19CompositeKeyMatchesContract(t *testing.T) {
	ti := &model.TableInfo{ID: 60, Name: ci("kv"), IsCommonHandle: true, State: model.StatePublic}
	ti.Columns = []*model.ColumnInfo{
		column(1, 0, colDef{name: "a", tp: mysql.TypeVarchar, flen: 20, flag: mysql.PriKeyFlag}),
		column(2, 1, colDef{name: "b", tp: mysql.TypeVarchar, flen: 20, charset: "binary", flag: mysql.PriKeyFlag}),
		column(3, 2, colDef{name: "c", tp: mysql.TypeDouble, flag: mysql.PriKeyFlag}),
		column(4, 3, colDef{name: "v", tp: mysql.TypeLong}),
	}
	ti.Indices = []*model.IndexInfo{{ID: 1, Name: ci("PRIMARY"), Primary: true, Unique: true, State: model.StatePublic,
		Columns: []*model.IndexColumn{{Name: ci("a"), Offset: 0}, {Name: ci("c"), Offset: 2}, {Name: ci("b"), Offset: 1}}}}
	sink := newFakeSink()
	h := newHarness(t, sink, Config{Tables: []Table{{PhysicalID: 60, Database: "d", Info: mt(ti)}}})
	def := sink.puts[0].GetDefinition()
	require.Equal(t, []string{"a", "c", "b"}, def.GetPrimaryKey())
	r := fakeRow{0: value.NewStringDatum(`x,y\z`), 1: value.NewBytesDatum([]byte{0xde, 0xad}), 2: value.NewFloat64Datum(0.5), 3: value.NewIntDatum(1)}
	require.NoError(t, h.b.AddRow(h.ctx, RowInput{TableID: 60, CommitTs: 110, RowType: minicdc.RowTypeInsert, Post: r, TableInfo: mt(ti)}))
	h.checkpoint(map[int64]uint64{60: 120})
	m := sink.mutationsOf("table:60")[0]
	want, err := apiv1.EncodePrimaryKey(def, m.GetFields())
	require.NoError(t, err)
	require.Equal(t, want, m.GetPrimaryKey())
	require.Equal(t, `x\,y\\z,0.5,dead`, m.GetPrimaryKey())
}

// TestRandomizedAgainstReference: random rows over two tables arrive out of
// order inside resolved intervals, with random checkpoints; afterwards per
// partition seqs are 1..n in (commit_ts, arrival) order (N6, N8) and the
// sink's documents equal a reference replay of that order.
func TestRandomizedAgainstReference(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	sink := newFakeSink()
	tables := []Table{
		{PhysicalID: 42, Database: "shop", Info: mt(intPKTable(42, "items"))},
		{PhysicalID: 43, Database: "shop", Info: mt(intPKTable(43, "users"))},
	}
	h := newHarness(t, sink, Config{Tables: tables, MaxBatchRows: 1 + rng.Intn(8)})
	type change struct {
		ts  uint64
		id  int64
		del bool
		n   int64
	}
	changes := map[int64][]change{}
	resolved := uint64(100)
	for round := 0; round < 60; round++ {
		next := resolved + 1 + uint64(rng.Intn(20))
		for i := 0; i < rng.Intn(12); i++ {
			tb := tables[rng.Intn(2)].PhysicalID
			c := change{ts: resolved + 1 + uint64(rng.Int63n(int64(next-resolved))), id: int64(rng.Intn(6)), del: rng.Intn(4) == 0, n: rng.Int63n(1000)}
			if c.del {
				h.del(tb, c.ts, row(c.id, "x", c.n))
			} else {
				h.upsert(tb, c.ts, row(c.id, "x", c.n))
			}
			changes[tb] = append(changes[tb], c)
		}
		resolved = next
		h.checkpoint(map[int64]uint64{42: resolved, 43: resolved})
	}
	for _, tb := range []int64{42, 43} {
		ms := sink.mutationsOf(PartitionName(0, tb))
		require.Len(t, ms, len(changes[tb]), "seed %d: every row delivered once", seed)
		exp := append([]change(nil), changes[tb]...)
		sort.SliceStable(exp, func(i, j int) bool { return exp[i].ts < exp[j].ts })
		live := map[string]int64{}
		for i, m := range ms {
			require.Equal(t, uint64(i+1), m.GetSeq(), "seed %d", seed)
			require.Equal(t, exp[i].ts, m.GetCommitTs(), "seed %d: canonical order", seed)
			k := value.NewIntDatum(exp[i].id).String()
			require.Equal(t, k, m.GetPrimaryKey(), "seed %d: stable tie-break", seed)
			if exp[i].del {
				delete(live, k)
			} else {
				live[k] = exp[i].n
			}
		}
		docs := sink.liveDocs(map[int64]string{42: "shop.items", 43: "shop.users"}[tb])
		require.Len(t, docs, len(live), "seed %d", seed)
		for k, n := range live {
			require.Equal(t, n, docs[k].GetFields()["n"].GetInt64Value(), "seed %d key %s", seed, k)
		}
	}
}

// TestSlabRecyclingKeepsValues pushes many rows with distinct strings
// through several chunk generations, sealing at random points, and checks
// every ingested value: recycled chunks must never be reused while a
// buffered row still points into them.
func TestSlabRecyclingKeepsValues(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	h, part := oneTable(t, Config{MaxBatchRows: 64})
	want := map[uint64]string{}
	ts := uint64(100)
	sealed := ts
	for i := 0; i < 20000; i++ {
		ts++
		title := fmt.Sprintf("row-%d-%s", i, strings.Repeat("x", rng.Intn(200)))
		h.upsert(42, ts, row(int64(i), title, int64(i)))
		want[ts] = title
		if rng.Intn(300) == 0 {
			sealed = sealed + uint64(rng.Int63n(int64(ts-sealed)+1))
			h.checkpoint(map[int64]uint64{42: sealed})
		}
	}
	h.checkpoint(map[int64]uint64{42: ts})
	ms := h.sink.mutationsOf(part)
	require.Len(t, ms, len(want), "seed %d", seed)
	for _, m := range ms {
		require.Equal(t, want[m.GetCommitTs()], m.GetFields()["title"].GetStringValue(), "seed %d ts %d", seed, m.GetCommitTs())
	}
}

// TestN28EventsSharingFinishedTs: two DDL events with one FinishedTs (a
// group, SS44) both apply; re-delivering either is a no-op.
func TestN28EventsSharingFinishedTs(t *testing.T) {
	h, _ := oneTable(t, Config{})
	ev1, ti1 := addColumnDDL(h.ti[42], 11, 150, 60, "x1", mysql.TypeLong)
	ev2, _ := addColumnDDL(ti1, 12, 150, 61, "x2", mysql.TypeLong)
	h.ddl(ev1)
	h.ddl(ev2)
	require.Len(t, h.sink.puts, 3)
	require.Len(t, h.sink.puts[2].GetDefinition().GetFields(), 5)
	h.ddl(ev1)
	h.ddl(ev2)
	require.Len(t, h.sink.puts, 3, "applied events are not resent")
}

// TestN3RenameKeepsCollectionAndPartition: a rename changes only source
// metadata (ADDITIVE); the collection name and partition stay.
func TestN3RenameKeepsCollectionAndPartition(t *testing.T) {
	h, part := oneTable(t, Config{})
	h.upsert(42, 110, row(1, "a", 0))
	renamed := *h.ti[42]
	renamed.Name = ci("products")
	h.ddl(&schemastore.DDLEvent{JobID: 40, Type: int(model.ActionRenameTable), TableID: 42, SchemaName: "store", TableName: "products",
		SchemaVersion: 90, FinishedTs: 120, TableInfo: &renamed})
	put := h.sink.puts[len(h.sink.puts)-1]
	require.Equal(t, "shop.items", put.GetScope().GetCollection())
	require.Equal(t, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE, put.GetUpdatePolicy())
	require.Equal(t, "products", put.GetDefinition().GetSource().GetTable())
	require.Equal(t, "store", put.GetDefinition().GetSource().GetDatabase())
	require.Equal(t, []string{part}, put.GetDefinition().GetSourcePartitions())
	h.ti[42] = &renamed
	h.upsert(42, 130, row(2, "b", 0))
	h.checkpoint(map[int64]uint64{42: 140})
	require.Len(t, h.sink.liveDocs("shop.items"), 2)
	require.Equal(t, uint64(2), h.sink.mutationsOf(part)[1].GetSeq())
}

// TestN27DropPartitionIsRebuildInPlace: dropping one configured partition
// removes it from the definition; the other keeps streaming.
func TestN27DropPartitionIsRebuildInPlace(t *testing.T) {
	logical := intPKTable(100, "events")
	logical.Partition = &model.PartitionInfo{Enable: true, Definitions: []model.PartitionDefinition{{ID: 101, Name: ci("p0")}, {ID: 102, Name: ci("p1")}}}
	sink := newFakeSink()
	h := newHarness(t, sink, Config{Tables: []Table{
		{PhysicalID: 101, Database: "app", Info: mt(logical)},
		{PhysicalID: 102, Database: "app", Info: mt(logical)},
	}})
	h.upsert(101, 110, row(1, "a", 0))
	h.upsert(102, 111, row(2, "b", 0))
	next := *logical
	next.Partition = &model.PartitionInfo{Enable: true, Definitions: []model.PartitionDefinition{{ID: 102, Name: ci("p1")}}}
	h.ddl(&schemastore.DDLEvent{JobID: 50, Type: int(model.ActionDropTablePartition), TableID: 100, SchemaName: "app",
		SchemaVersion: 95, FinishedTs: 120, TableInfo: &next, NeedDroppedTables: []int64{101}})
	put := sink.puts[len(sink.puts)-1]
	require.Equal(t, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE, put.GetUpdatePolicy())
	require.Equal(t, []string{"table:102"}, put.GetDefinition().GetSourcePartitions())
	require.Len(t, sink.mutationsOf("table:101"), 1, "rows at or below the DDL were flushed first")
	require.Len(t, sink.mutationsOf("table:102"), 1, "every partition is flushed at a table-set change (N34)")
	// The table set changed (N34): the next checkpoint reports it (N35)
	// and moves nothing.
	h.upsert(102, 130, row(3, "c", 0))
	var tsc *TableSetChangedError
	require.ErrorAs(t, h.b.Checkpoint(h.ctx, map[int64]uint64{101: 140, 102: 140}), &tsc)
	require.Equal(t, []int64{101}, tsc.Dropped)
	require.Empty(t, tsc.Added)
	require.Equal(t, []int64{102}, tsc.NewTableIDs)
	require.Len(t, sink.mutationsOf("table:102"), 1)
	for _, a := range sink.advs {
		if a.GetSourcePartition() == "table:101" {
			require.LessOrEqual(t, a.GetResolvedTs(), uint64(120), "a removed partition stops reporting")
		}
	}
}

func TestStatsAndRowBeforeOpen(t *testing.T) {
	b, err := New(Config{ClientID: "c", StartTs: 100, Tables: []Table{{PhysicalID: 42, Database: "shop", Info: mt(intPKTable(42, "items"))}}}, newFakeSink())
	require.NoError(t, err)
	require.Error(t, b.AddRow(context.Background(), RowInput{TableID: 42, CommitTs: 110, RowType: minicdc.RowTypeInsert, Post: row(1, "a", 0)}))
	h, _ := oneTable(t, Config{})
	h.upsert(42, 110, row(1, "a", 0))
	h.upsert(42, 120, row(2, "b", 0))
	h.checkpoint(map[int64]uint64{42: 115})
	st := h.b.Stats()
	require.Len(t, st, 1)
	require.Equal(t, PartitionStats{Partition: "table:42", Collection: "shop.items", Epoch: 1, NextSeq: 2, ResolvedTs: 115,
		UnsealedRows: 1, UnsealedBytes: st[0].UnsealedBytes, RowsIn: 2, Ingested: 1}, st[0])
	require.Positive(t, st[0].UnsealedBytes)
}

// TestLargeAndWideRowsOutsideChunks: values larger than a chunk share and
// tables wider than a chunk's value budget take their own memory and still
// round-trip.
func TestLargeAndWideRowsOutsideChunks(t *testing.T) {
	h, part := oneTable(t, Config{})
	big := strings.Repeat("b", 20000)
	h.upsert(42, 110, row(1, big, 1))
	h.upsert(42, 111, row(2, "small", 2))
	var wide []colDef
	for i := 0; i < 300; i++ {
		wide = append(wide, colDef{name: fmt.Sprintf("c%d", i), tp: mysql.TypeLong})
	}
	wti := intPKTable(43, "wide", wide...)
	sink := newFakeSink()
	h2 := newHarness(t, sink, Config{Tables: []Table{{PhysicalID: 43, Database: "shop", Info: mt(wti)}}})
	r := row(7, "w", 0)
	for i := 0; i < 300; i++ {
		r[3+i] = value.NewIntDatum(int64(i))
	}
	h2.upsert(43, 110, r)
	h.checkpoint(map[int64]uint64{42: 120})
	h2.checkpoint(map[int64]uint64{43: 120})
	ms := h.sink.mutationsOf(part)
	require.Equal(t, big, ms[0].GetFields()["title"].GetStringValue())
	require.Equal(t, "small", ms[1].GetFields()["title"].GetStringValue())
	wm := sink.mutationsOf("table:43")[0]
	require.Len(t, wm.GetFields(), 303)
	require.Equal(t, int64(299), wm.GetFields()["c299"].GetInt64Value())
}

// TestN7IngestFailureStopsBridge: after a failed ingest the drained rows
// cannot be re-sent with the same seqs, so every later call fails.
func TestN7IngestFailureStopsBridge(t *testing.T) {
	h, _ := oneTable(t, Config{})
	h.upsert(42, 110, row(1, "a", 0))
	h.sink.failIngest = 1
	err := h.b.Checkpoint(h.ctx, map[int64]uint64{42: 120})
	require.ErrorContains(t, err, "injected ingest failure")
	require.ErrorContains(t, h.b.Err(), "injected ingest failure")
	require.ErrorContains(t, h.b.Checkpoint(h.ctx, map[int64]uint64{42: 130}), "bridge stopped")
	require.ErrorContains(t, h.b.AddRow(h.ctx, RowInput{TableID: 42, CommitTs: 140, RowType: minicdc.RowTypeInsert, Post: row(2, "b", 0), TableInfo: mt(h.ti[42])}), "bridge stopped")
	ev, _ := addColumnDDL(h.ti[42], 9, 150, 60, "extra", mysql.TypeLong)
	require.ErrorContains(t, h.b.DDL(h.ctx, ddlOf(ev)), "bridge stopped")
	for _, a := range h.sink.advs {
		require.NotEqual(t, "table:42", a.GetSourcePartition(), "progress never moved past unacknowledged data")
	}
}

// TestRandomizedDDLGenerations: random add-column DDLs interleaved with
// rows decoded at commit_ts-1 (old schema at or below the DDL, new schema
// above it, some arriving before the DDL). Every batch must carry the
// generation that matches its rows: the fake sink rejects fields unknown
// to the current definition (E36) and stale tokens (E35), and every row
// arrives once in canonical order (N11, N21, N29).
func TestRandomizedDDLGenerations(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	sink := newFakeSink()
	base := intPKTable(42, "items")
	h := newHarness(t, sink, Config{Tables: []Table{{PhysicalID: 42, Database: "shop", Info: mt(base)}}, MaxBatchRows: 1 + rng.Intn(5)})
	type version struct {
		from uint64 // schema valid for commit_ts > from
		ti   *model.TableInfo
	}
	versions := []version{{0, base}}
	schemaFor := func(ts uint64) *model.TableInfo {
		v := versions[0].ti
		for _, x := range versions {
			if ts > x.from {
				v = x.ti
			}
		}
		return v
	}
	resolved := uint64(100)
	total := 0
	job := int64(1)
	for round := 0; round < 40; round++ {
		next := resolved + 2 + uint64(rng.Intn(20))
		var ddlTs uint64
		var ev *schemastore.DDLEvent
		if rng.Intn(2) == 0 {
			ddlTs = resolved + 1 + uint64(rng.Int63n(int64(next-resolved-1)))
			cur := versions[len(versions)-1].ti
			var nti *model.TableInfo
			ev, nti = addColumnDDL(cur, job, ddlTs, 100+job, fmt.Sprintf("c%d", job), mysql.TypeLong)
			job++
			versions = append(versions, version{from: ddlTs, ti: nti})
		}
		type pending struct {
			ts uint64
			r  fakeRow
		}
		var before, after []pending // relative to OnDDL
		for i := 0; i < rng.Intn(10); i++ {
			ts := resolved + 1 + uint64(rng.Int63n(int64(next-resolved)))
			ti := schemaFor(ts)
			r := row(int64(rng.Intn(5)), "x", int64(ts))
			for off := 3; off < len(ti.Columns); off++ {
				r[off] = value.NewIntDatum(int64(off))
			}
			if ev != nil && ts > ddlTs && rng.Intn(2) == 0 {
				after = append(after, pending{ts, r})
			} else {
				before = append(before, pending{ts, r})
			}
		}
		for _, p := range before {
			h.ti[42] = schemaFor(p.ts)
			h.upsert(42, p.ts, p.r)
		}
		if ev != nil {
			require.NoError(t, h.b.DDL(h.ctx, ddlOf(ev)), "seed %d round %d", seed, round)
		}
		for _, p := range after {
			h.ti[42] = schemaFor(p.ts)
			h.upsert(42, p.ts, p.r)
		}
		require.NoError(t, h.b.Checkpoint(h.ctx, map[int64]uint64{42: next}), "seed %d round %d", seed, round)
		total += len(before) + len(after)
		resolved = next
	}
	ms := sink.mutationsOf("table:42")
	require.Len(t, ms, total, "seed %d", seed)
	for i, m := range ms {
		require.Equal(t, uint64(i+1), m.GetSeq(), "seed %d", seed)
		if i > 0 {
			require.LessOrEqual(t, ms[i-1].GetCommitTs(), m.GetCommitTs(), "seed %d", seed)
		}
		require.Len(t, m.GetFields(), len(schemaFor(m.GetCommitTs()).Columns), "seed %d: row shape matches its schema", seed)
	}
}
