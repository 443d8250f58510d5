package normalize

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/grpcapi"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize/grpcsink"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/mounter"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// feeder turns scripted row changes into minicdc.RowChanged through the
// real mounter (encoded with the real row codec), like the runtime does.
type feeder struct {
	t  *testing.T
	cb minicdc.Callback
	m  *mounter.Mounter
}

// encode builds the v2 row value of an intPKTable-shaped row (handle
// column not stored).
func encode(t *testing.T, ti *model.TableInfo, vals map[string]value.Datum) []byte {
	var ids []int64
	var ds []value.Datum
	for _, c := range ti.Columns {
		if ti.PKIsHandle && mysql.HasPriKeyFlag(c.FieldType.GetFlag()) {
			continue
		}
		if d, ok := vals[c.Name.L]; ok {
			ids = append(ids, c.ID)
			ds = append(ds, d)
		}
	}
	b, err := rowcodec.EncodeV2(nil, ids, ds, nil)
	require.NoError(t, err)
	return b
}

func (f *feeder) change(tableID int64, ti *model.TableInfo, ts uint64, handle int64, old, new map[string]value.Datum) {
	f.t.Helper()
	e := kvevent.RawKVEntry{Key: tablecodec.EncodeIntRecordKey(nil, tableID, handle), StartTs: ts - 1, CRTs: ts}
	if new != nil {
		e.OpType = kvevent.OpTypePut
		e.Value = encode(f.t, ti, new)
	} else {
		e.OpType = kvevent.OpTypeDelete
	}
	if old != nil {
		e.OldValue = encode(f.t, ti, old)
	}
	var rc mounter.RowChange
	require.NoError(f.t, f.m.Decode(&e, ti, &rc))
	require.NoError(f.t, f.cb.OnRowChanged(context.Background(), minicdc.RowChanged{
		TableID: rc.TableID, StartTs: e.StartTs, CommitTs: ts, RowType: minicdc.RowType(rc.RowType),
		PreRow: minicdc.NewRow(rc.PreRow), Row: minicdc.NewRow(rc.Row), RowKey: rc.RowKey, TableInfo: mt(ti),
	}))
}

func vals(title string, n int64) map[string]value.Datum {
	return map[string]value.Datum{"title": value.NewStringDatum(title), "n": value.NewIntDatum(n)}
}

// TestE2EScriptedThroughEmulator runs a scripted callback sequence through
// the real mounter, the bridge and the real emulator (persisted in a temp
// dir), with a restart in the middle, and compares the final documents with
// the reference.
//
// Rule N24: the safe_ts checked here is what the emulator derived from the
// partitions' progress; the bridge's Sink has no call that writes it.
func TestE2EScriptedThroughEmulator(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	em, err := emulator.Open(dir, emulator.Options{})
	require.NoError(t, err)

	items := intPKTable(41, "items")
	users := intPKTable(200, "users")
	users.Partition = &model.PartitionInfo{Enable: true, Definitions: []model.PartitionDefinition{{ID: 201, Name: ci("p0")}, {ID: 202, Name: ci("p1")}}}
	tables := []Table{
		{PhysicalID: 41, SchemaID: 2, Database: "shop", Info: mt(items)},
		{PhysicalID: 201, SchemaID: 2, Database: "shop", Info: mt(users)},
		{PhysicalID: 202, SchemaID: 2, Database: "shop", Info: mt(users)},
	}
	// title is a keyword here (N18 override): with no text modality the
	// reopened emulator has no async indexer (see the report on the
	// emulator's reopen race).
	roles := map[string]RoleOverrides{"shop.items": {"title": apiv1.FieldRole_FIELD_ROLE_KEYWORD}, "shop.users": {"title": apiv1.FieldRole_FIELD_ROLE_KEYWORD}}
	br, err := New(Config{ClientID: "e2e", StartTs: 100, Tables: tables, MaxBatchRows: 2, Roles: roles}, em)
	require.NoError(t, err)
	res, err := br.Open(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), res.Epoch)
	f := &feeder{t: t, cb: br, m: mounter.New(mounter.Config{RequireOldValue: true})}

	// Out-of-order arrivals inside one resolved interval.
	f.change(41, items, 110, 1, nil, vals("alpha", 1))
	f.change(41, items, 105, 2, nil, vals("beta", 2))
	f.change(201, users, 107, 10, nil, vals("ann", 10))
	f.change(202, users, 108, 11, nil, vals("bob", 11))
	f.change(41, items, 110, 4, nil, vals("delta", 4))
	require.NoError(t, br.OnCheckpoint(ctx, minicdc.Checkpoint{GlobalResolvedTs: 112, TableResolvedTs: map[int64]uint64{41: 112, 201: 112, 202: 112}}))
	f.change(41, items, 115, 1, vals("alpha", 1), vals("alpha2", 1))
	f.change(41, items, 116, 2, vals("beta", 2), nil)

	// DDL: add column at 120; a row decoded with the new schema is already
	// buffered when the DDL arrives.
	ev, items2 := addColumnDDL(items, 9, 120, 50, "extra", mysql.TypeLong)
	withExtra := vals("gamma", 3)
	withExtra["extra"] = value.NewIntDatum(9)
	f.change(41, items2, 125, 3, nil, withExtra)
	require.NoError(t, br.OnDDL(ctx, ddlOf(ev)))
	require.NoError(t, br.OnCheckpoint(ctx, minicdc.Checkpoint{GlobalResolvedTs: 130, TableResolvedTs: map[int64]uint64{41: 130, 201: 130, 202: 130}}))

	em.WaitIndexed() // text/vector apply asynchronously (E51)
	st, err := em.GetCollection(ctx, &apiv1.GetCollectionRequest{Name: "shop.items"})
	require.NoError(t, err)
	require.Equal(t, uint64(130), st.GetSafeTs())

	// Restart: the emulator is reopened from disk, the bridge resumes.
	require.NoError(t, em.Close())
	em, err = emulator.Open(dir, emulator.Options{})
	require.NoError(t, err)
	defer em.Close()
	partNames := []string{"table:201", "table:202", "table:41"}
	res, err = ResumePoint(ctx, em, partNames, 100)
	require.NoError(t, err)
	require.Equal(t, uint64(130), res.StartTs)
	require.Equal(t, uint64(2), res.Epoch)
	tables[0].Info = mt(items2)
	br2, err := New(Config{ClientID: "e2e", StartTs: res.StartTs, Tables: tables, Roles: roles}, em)
	require.NoError(t, err)
	_, err = br2.Open(ctx)
	require.NoError(t, err)
	f.cb = br2
	require.NoError(t, br2.OnDDL(ctx, ddlOf(ev)), "replayed DDL is a no-op")
	f.change(41, items2, 125, 3, nil, withExtra) // redelivered, acknowledged: skipped
	upd := vals("gamma2", 33)
	upd["extra"] = value.NewIntDatum(10)
	f.change(41, items2, 135, 3, withExtra, upd)
	f.change(202, users, 136, 11, vals("bob", 11), nil)
	require.NoError(t, br2.OnCheckpoint(ctx, minicdc.Checkpoint{GlobalResolvedTs: 140, TableResolvedTs: map[int64]uint64{41: 140, 201: 140, 202: 140}}))

	em.WaitIndexed()
	// Reference documents.
	want := map[string]map[string]map[string]any{
		"shop.items": {
			"1": {"id": int64(1), "title": "alpha2", "n": int64(1), "extra": nil},
			"3": {"id": int64(3), "title": "gamma2", "n": int64(33), "extra": int64(10)},
			"4": {"id": int64(4), "title": "delta", "n": int64(4), "extra": nil},
		},
		"shop.users": {
			"10": {"id": int64(10), "title": "ann", "n": int64(10)},
		},
	}
	for coll, docs := range want {
		all, _, err := em.Scan(ctx, coll, nil, "", 100)
		require.NoError(t, err)
		got := map[string]map[string]any{}
		for _, d := range all {
			fields := map[string]any{}
			for k, v := range d.GetFields() {
				fields[k] = plain(v)
			}
			got[d.GetPrimaryKey()] = fields
		}
		for pk, fields := range docs {
			for k, v := range fields {
				if v == nil {
					if gv, ok := got[pk][k]; ok {
						require.Nil(t, gv, "%s/%s.%s", coll, pk, k)
					}
					delete(fields, k)
				}
			}
		}
		for pk := range got {
			for k, v := range got[pk] {
				if v == nil {
					delete(got[pk], k)
				}
			}
		}
		require.Equal(t, docs, got, "collection %s", coll)
		st, err := em.GetCollection(ctx, &apiv1.GetCollectionRequest{Name: coll})
		require.NoError(t, err)
		require.Equal(t, uint64(140), st.GetSafeTs(), coll)
	}
	prog, err := em.GetProgress(ctx, &apiv1.GetProgressRequest{SourcePartitions: partNames})
	require.NoError(t, err)
	for _, p := range prog.GetPartitions() {
		require.Equal(t, uint64(2), p.GetSourceEpoch(), p.GetSourcePartition())
		require.Equal(t, uint64(140), p.GetResolvedTs(), p.GetSourcePartition())
	}
}

func plain(v *apiv1.Value) any {
	switch k := v.GetKind().(type) {
	case *apiv1.Value_Int64Value:
		return k.Int64Value
	case *apiv1.Value_Uint64Value:
		return k.Uint64Value
	case *apiv1.Value_StringValue:
		return k.StringValue
	case *apiv1.Value_DoubleValue:
		return k.DoubleValue
	case *apiv1.Value_NullValue, nil:
		return nil
	}
	return v.String()
}

// TestE2EOverGRPC: the same bridge calls work against the emulator's gRPC
// service through grpcsink.Sink.
func TestE2EOverGRPC(t *testing.T) {
	ctx := context.Background()
	em, err := emulator.Open("", emulator.Options{})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpcapi.NewServer(em, grpcapi.Options{})
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(); srv.Stop(); _ = em.Close() })

	items := intPKTable(41, "items")
	br, err := New(Config{ClientID: "grpc", StartTs: 100, Tables: []Table{{PhysicalID: 41, Database: "shop", Info: mt(items)}}}, grpcsink.New(conn))
	require.NoError(t, err)
	_, err = br.Open(ctx)
	require.NoError(t, err)
	f := &feeder{t: t, cb: br, m: mounter.New(mounter.Config{RequireOldValue: true})}
	f.change(41, items, 110, 1, nil, vals("alpha", 1))
	f.change(41, items, 105, 2, nil, vals("beta", 2))
	require.NoError(t, br.OnCheckpoint(ctx, minicdc.Checkpoint{TableResolvedTs: map[int64]uint64{41: 120}}))
	ev, _ := addColumnDDL(items, 9, 125, 50, "extra", mysql.TypeLong)
	require.NoError(t, br.OnDDL(ctx, ddlOf(ev)))
	doc, err := em.GetDocument(ctx, &apiv1.GetDocumentRequest{Collection: "shop.items", PrimaryKey: "1", MinTs: 120})
	require.NoError(t, err)
	require.True(t, doc.GetFound())
	require.Equal(t, "alpha", doc.GetDocument().GetFields()["title"].GetStringValue())
	em.WaitIndexed()
	st, err := em.GetCollection(ctx, &apiv1.GetCollectionRequest{Name: "shop.items"})
	require.NoError(t, err)
	require.Equal(t, uint64(125), st.GetSafeTs())
	require.Equal(t, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE, st.GetLineage().GetLastUpdatePolicy())
}

// TestE2EContractRejectionIsFatal: a rejection by the emulator surfaces
// as the callback's error (the runtime stops).
func TestE2EContractRejectionIsFatal(t *testing.T) {
	ctx := context.Background()
	em, err := emulator.Open("", emulator.Options{})
	require.NoError(t, err)
	defer em.Close()
	items := intPKTable(41, "items")
	br, err := New(Config{ClientID: "x", StartTs: 100, Tables: []Table{{PhysicalID: 41, Database: "shop", Info: mt(items)}}}, em)
	require.NoError(t, err)
	_, err = br.Open(ctx)
	require.NoError(t, err)
	// The zero-state version is 1, so a DDL carrying schema version 1 does
	// not grow it: NON_MONOTONIC_SCHEMA (E25).
	ev, _ := addColumnDDL(items, 9, 125, 1, "extra", mysql.TypeLong)
	err = br.OnDDL(ctx, ddlOf(ev))
	require.Error(t, err)
	require.Equal(t, emulator.Reason("NON_MONOTONIC_SCHEMA"), emulator.ReasonOf(err))
	require.False(t, errors.Is(err, ErrReorderOverflow))
}

// TestMounterDeleteWithoutOldValue: a delete whose PreRow is handle-only
// (no old value) still yields the right key through the real mounter.
func TestMounterDeleteWithoutOldValue(t *testing.T) {
	ctx := context.Background()
	sink := newFakeSink()
	items := intPKTable(41, "items")
	br, err := New(Config{ClientID: "m", StartTs: 100, Tables: []Table{{PhysicalID: 41, Database: "shop", Info: mt(items)}}}, sink)
	require.NoError(t, err)
	_, err = br.Open(ctx)
	require.NoError(t, err)
	f := &feeder{t: t, cb: br, m: mounter.New(mounter.Config{RequireOldValue: false})}
	f.change(41, items, 110, 7, nil, vals("x", 1))
	f.change(41, items, 111, 7, nil, nil) // delete, no old value
	require.NoError(t, br.OnCheckpoint(ctx, minicdc.Checkpoint{TableResolvedTs: map[int64]uint64{41: 120}}))
	ms := sink.mutationsOf("table:41")
	require.Len(t, ms, 2)
	require.Equal(t, apiv1.MutationKind_MUTATION_KIND_DELETE, ms[1].GetKind())
	require.Equal(t, "7", ms[1].GetPrimaryKey())
	require.Empty(t, sink.liveDocs("shop.items"))
}

// TestMounterClusteredCompositeKey: a clustered (common handle) table with a
// two-column key, through the real row codec and mounter (bulk decode).
func TestMounterClusteredCompositeKey(t *testing.T) {
	ctx := context.Background()
	ti := &model.TableInfo{ID: 70, Name: ci("kv"), IsCommonHandle: true, CommonHandleVersion: 1, State: model.StatePublic, MaxColumnID: 3}
	ti.Columns = []*model.ColumnInfo{
		column(1, 0, colDef{name: "a", tp: mysql.TypeVarchar, flen: 20, flag: mysql.PriKeyFlag | mysql.NotNullFlag}),
		column(2, 1, colDef{name: "b", tp: mysql.TypeLonglong, flag: mysql.PriKeyFlag | mysql.NotNullFlag}),
		column(3, 2, colDef{name: "v", tp: mysql.TypeVarchar, flen: 200}),
	}
	ti.Indices = []*model.IndexInfo{{ID: 1, Name: ci("PRIMARY"), Primary: true, Unique: true, State: model.StatePublic,
		Columns: []*model.IndexColumn{{Name: ci("a"), Offset: 0, Length: -1}, {Name: ci("b"), Offset: 1, Length: -1}}}}
	sink := newFakeSink()
	br, err := New(Config{ClientID: "m", StartTs: 100, Tables: []Table{{PhysicalID: 70, Database: "d", Info: mt(ti)}}}, sink)
	require.NoError(t, err)
	_, err = br.Open(ctx)
	require.NoError(t, err)
	m := mounter.New(mounter.Config{RequireOldValue: true})
	h, err := tablecodec.CommonHandleFromDatums(value.NewStringDatum("x,y"), value.NewIntDatum(5))
	require.NoError(t, err)
	val, err := rowcodec.EncodeV2(nil, []int64{1, 2, 3}, []value.Datum{value.NewStringDatum("x,y"), value.NewIntDatum(5), value.NewStringDatum("hello")}, nil)
	require.NoError(t, err)
	e := kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: tablecodec.EncodeRecordKey(nil, 70, h), Value: val, StartTs: 109, CRTs: 110}
	var rc mounter.RowChange
	require.NoError(t, m.Decode(&e, ti, &rc))
	require.NoError(t, br.OnRowChanged(ctx, minicdc.RowChanged{TableID: 70, CommitTs: 110, RowType: minicdc.RowType(rc.RowType), Row: minicdc.NewRow(rc.Row), PreRow: minicdc.NewRow(rc.PreRow), RowKey: rc.RowKey, TableInfo: mt(ti)}))
	require.NoError(t, br.OnCheckpoint(ctx, minicdc.Checkpoint{TableResolvedTs: map[int64]uint64{70: 120}}))
	ms := sink.mutationsOf("table:70")
	require.Len(t, ms, 1)
	require.Equal(t, `x\,y,5`, ms[0].GetPrimaryKey())
	require.Equal(t, "hello", ms[0].GetFields()["v"].GetStringValue())
	want, err := apiv1.EncodePrimaryKey(sink.puts[0].GetDefinition(), ms[0].GetFields())
	require.NoError(t, err)
	require.Equal(t, want, ms[0].GetPrimaryKey())
}
