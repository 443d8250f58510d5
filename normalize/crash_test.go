package normalize

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/stretchr/testify/require"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/upstream/schemastore"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

var errCrashed = errors.New("crash: the process died")

// crashSink forwards to a fakeSink until budget calls were made, then
// "crashes": call number budget+1 fails (applied first when applyThenFail:
// the emulator committed it but the answer was lost) and so does every
// later call.
type crashSink struct {
	inner         *fakeSink
	budget        int
	applyThenFail bool
	calls         int
	crashed       bool
}

func (c *crashSink) gate() (apply bool, err error) {
	if c.crashed {
		return false, errCrashed
	}
	c.calls++
	if c.calls <= c.budget {
		return true, nil
	}
	c.crashed = true
	return c.applyThenFail, errCrashed
}

func crashCall[Req, Resp any](c *crashSink, f func(context.Context, Req) (Resp, error), ctx context.Context, req Req) (Resp, error) {
	apply, err := c.gate()
	if err == nil {
		return f(ctx, req)
	}
	var zero Resp
	if apply {
		_, _ = f(ctx, req)
	}
	return zero, err
}

func (c *crashSink) PutCollectionSchema(ctx context.Context, r *apiv1.PutCollectionSchemaRequest) (*apiv1.PutCollectionSchemaResponse, error) {
	return crashCall(c, c.inner.PutCollectionSchema, ctx, r)
}
func (c *crashSink) Ingest(ctx context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error) {
	return crashCall(c, c.inner.Ingest, ctx, b)
}
func (c *crashSink) AdvancePartition(ctx context.Context, p *apiv1.PartitionProgress) (*apiv1.AdvancePartitionResponse, error) {
	return crashCall(c, c.inner.AdvancePartition, ctx, p)
}
func (c *crashSink) GetProgress(ctx context.Context, r *apiv1.GetProgressRequest) (*apiv1.GetProgressResponse, error) {
	return crashCall(c, c.inner.GetProgress, ctx, r)
}
func (c *crashSink) ListCollections(ctx context.Context, r *apiv1.ListCollectionsRequest) (*apiv1.ListCollectionsResponse, error) {
	return crashCall(c, c.inner.ListCollections, ctx, r)
}

// scriptEvent is one callback of a scripted Mini-CDC delivery: a row, a
// DDL or a checkpoint (of every configured table), at ts.
type scriptEvent struct {
	ts  uint64
	row *RowInput
	ddl *schemastore.DDLEvent
	cp  bool
}

// crashScript is a workload around one DDL at ddlTs on one collection:
// rows and checkpoints before it (old schema), the DDL, rows after it (new
// schema).
type crashScript struct {
	name       string
	db         string
	collection string
	initial    []int64 // physical ids before the DDL
	before     *model.TableInfo
	after      *model.TableInfo
	ddlTs      uint64
	events     []scriptEvent
	wantDef    []string // field names of the final definition
	wantParts  []string // source partitions of the final definition
}

// tables is the configuration a host restarts with after a crash: the
// partitions the emulator maps and the schema of the lineage it stored.
func (s *crashScript) tables(sink *fakeSink) []Table {
	ids, info := s.initial, s.before
	if c := sink.colls[s.collection]; c != nil {
		ids = nil
		for _, pn := range c.def.GetSourcePartitions() {
			id, ok := partitionID(pn)
			if !ok {
				panic(pn)
			}
			ids = append(ids, id)
		}
		if c.lineage.GetLastDdlCommitTs() >= s.ddlTs {
			info = s.after
		}
	}
	var out []Table
	for _, id := range ids {
		out = append(out, Table{PhysicalID: id, SchemaID: 2, Database: s.db, Info: mt(info)})
	}
	return out
}

// run delivers the script to bridges over sink from what inner (the
// emulator's state) holds: each run gets the events above its resume
// point for the tables it follows, and stops at the first error, like the
// runtime does (M14); a table-set change restarts it with the error's
// tables, like the supervisor does (M48).
func (s *crashScript) run(sink Sink, inner *fakeSink) error {
	ctx := context.Background()
	tables := s.tables(inner)
restart:
	for restarts := 0; restarts < 4; restarts++ {
		b, err := New(Config{ClientID: "adapter-1", StartTs: 100, Tables: tables}, sink)
		if err != nil {
			return err
		}
		res, err := b.Open(ctx)
		if err != nil {
			return err
		}
		follows := map[int64]bool{}
		for _, t := range tables {
			follows[t.PhysicalID] = true
		}
		for _, ev := range s.events {
			if ev.ts <= res.StartTs {
				continue // Mini-CDC's start ts is exclusive (M20, M28)
			}
			switch {
			case ev.row != nil:
				if !follows[ev.row.TableID] {
					continue // not subscribed by this run (M6)
				}
				err = b.AddRow(ctx, *ev.row)
			case ev.ddl != nil:
				err = b.DDL(ctx, ddlOf(ev.ddl))
			case ev.cp:
				cp := map[int64]uint64{}
				for id := range follows {
					cp[id] = ev.ts
				}
				err = b.Checkpoint(ctx, cp)
			}
			var tsc *TableSetChangedError
			if errors.As(err, &tsc) {
				tables = tsc.Tables
				continue restart
			}
			if err != nil {
				return fmt.Errorf("event at %d: %w", ev.ts, err)
			}
		}
		return nil
	}
	return fmt.Errorf("too many restarts")
}

func dropColumnDDL(ti *model.TableInfo, jobID int64, ts uint64, schemaVersion int64, name string) (*schemastore.DDLEvent, *model.TableInfo) {
	next := *ti
	next.Columns = nil
	for _, c := range ti.Columns {
		if c.Name.L == name {
			continue
		}
		cc := *c
		cc.Offset = len(next.Columns)
		next.Columns = append(next.Columns, &cc)
	}
	next.UpdateTS = ts
	return &schemastore.DDLEvent{JobID: jobID, Type: int(model.ActionDropColumn), SchemaName: "shop", TableName: ti.Name.O,
		TableID: ti.ID, SchemaVersion: schemaVersion, FinishedTs: ts, TableInfo: &next}, &next
}

func crashScripts() []*crashScript {
	ev := func(id int64, ti *model.TableInfo, ts uint64, r fakeRow, kind minicdc.RowType) scriptEvent {
		return scriptEvent{ts: ts, row: &RowInput{TableID: id, CommitTs: ts, RowType: kind, Post: r, Pre: r, TableInfo: mt(ti)}}
	}
	oneTable := func(name string, before, after *model.TableInfo, ddl *schemastore.DDLEvent, newRow fakeRow, wantDef []string) *crashScript {
		return &crashScript{name: name, db: "shop", collection: "shop.items", initial: []int64{42}, before: before, after: after,
			ddlTs: ddl.FinishedTs, wantDef: wantDef, wantParts: []string{"table:42"}, events: []scriptEvent{
				ev(42, before, 110, row(1, "a", 1), minicdc.RowTypeInsert),
				ev(42, before, 120, row(2, "b", 2), minicdc.RowTypeInsert),
				{ts: 125, cp: true},
				ev(42, before, 130, row(1, "a2", 3), minicdc.RowTypeUpdate),
				{ts: ddl.FinishedTs, ddl: ddl},
				ev(42, after, 150, newRow, minicdc.RowTypeInsert),
				{ts: 160, cp: true},
			}}
	}
	base := intPKTable(42, "items")
	add, added := addColumnDDL(base, 7, 140, 50, "extra", mysql.TypeLong)
	addRow := row(3, "c", 4)
	addRow[3] = value.NewIntDatum(77)
	drop, dropped := dropColumnDDL(base, 8, 140, 50, "n")
	dropRow := fakeRow{0: value.NewIntDatum(3), 1: value.NewStringDatum("c")}

	// A table-set change (N34): TRUNCATE PARTITION gives partition 102 the
	// new id 103.
	events := rangeTable(100, "events", 101, 102)
	truncated := rangeTable(100, "events", 101, 103)
	truncated.UpdateTS = 140
	trunc := &schemastore.DDLEvent{JobID: 9, Type: int(model.ActionTruncateTablePartition), TableID: 100, SchemaID: 2, SchemaName: "app",
		SchemaVersion: 60, FinishedTs: 140, TableInfo: truncated, NeedDroppedTables: []int64{102},
		NeedAddedTables: []schemastore.AddedTable{{SchemaID: 2, TableID: 103}}}
	tableSet := &crashScript{name: "truncate partition", db: "app", collection: "app.events", initial: []int64{101, 102},
		before: events, after: truncated, ddlTs: 140, wantDef: []string{"id", "title", "n"}, wantParts: []string{"table:101", "table:103"},
		events: []scriptEvent{
			ev(101, events, 110, row(1, "a", 1), minicdc.RowTypeInsert),
			ev(102, events, 120, row(2, "b", 2), minicdc.RowTypeInsert),
			{ts: 125, cp: true},
			ev(102, events, 130, row(2, "b2", 3), minicdc.RowTypeUpdate),
			ev(101, events, 135, row(1, "a2", 3), minicdc.RowTypeUpdate),
			{ts: 140, ddl: trunc},
			ev(103, truncated, 150, row(4, "d", 4), minicdc.RowTypeInsert),
			ev(101, truncated, 155, row(5, "e", 5), minicdc.RowTypeInsert),
			{ts: 160, cp: true},
		}}
	return []*crashScript{
		oneTable("add column", base, added, add, addRow, []string{"id", "title", "n", "extra"}),
		oneTable("drop column", base, dropped, drop, dropRow, []string{"id", "title"}),
		tableSet,
	}
}

// finalState is what a run leaves in the sink: the definition's field
// names and partitions, the last DDL ts, the documents' fields, the
// partitions' resolved ts.
type finalState struct {
	def      []string
	parts    []string
	lastDDL  uint64
	docs     map[string]map[string]any
	resolved map[string]uint64
}

func stateOf(s *fakeSink, coll string) finalState {
	st := finalState{docs: map[string]map[string]any{}, resolved: map[string]uint64{}}
	c := s.colls[coll]
	if c == nil {
		return st
	}
	for _, f := range c.def.GetFields() {
		st.def = append(st.def, f.GetName())
	}
	st.parts = c.def.GetSourcePartitions()
	st.lastDDL = c.lineage.GetLastDdlCommitTs()
	for pk, m := range s.liveDocs(coll) {
		fs := map[string]any{}
		for k, v := range m.GetFields() {
			fs[k] = plain(v)
		}
		st.docs[pk] = fs
	}
	for _, p := range st.parts {
		st.resolved[p] = s.parts[p].GetResolvedTs()
	}
	return st
}

// TestN26CrashAtEveryCallResumesWithTheSchemaChange: the process dies at
// every sink call of a workload with a DDL (the call not applied, or
// applied with its answer lost); a new bridge reopens from what the
// emulator stored and Mini-CDC redelivers everything above the resume
// point. The outcome must equal the run without a crash: the DDL is never
// lost (progress at T is stored only after the schema change at T is
// acknowledged, N26, N34), and rows at or below a stored DDL are not
// re-sent against the post-DDL definition (N20).
func TestN26CrashAtEveryCallResumesWithTheSchemaChange(t *testing.T) {
	for _, sc := range crashScripts() {
		ref := newFakeSink()
		require.NoError(t, sc.run(ref, ref), sc.name)
		want := stateOf(ref, sc.collection)
		require.Equal(t, sc.wantDef, want.def, sc.name)
		require.Equal(t, sc.wantParts, want.parts, sc.name)
		require.Equal(t, uint64(140), want.lastDDL, sc.name)
		for p, ts := range want.resolved {
			require.Equal(t, uint64(160), ts, "%s: %s", sc.name, p)
		}
		require.NotEmpty(t, want.docs, sc.name)

		for _, applyThenFail := range []bool{false, true} {
			for n := 0; ; n++ {
				name := fmt.Sprintf("%s: crash at call %d (applied: %v)", sc.name, n+1, applyThenFail)
				inner := newFakeSink()
				cs := &crashSink{inner: inner, budget: n, applyThenFail: applyThenFail}
				err := sc.run(cs, inner)
				if !cs.crashed {
					require.NoError(t, err, name)
					break
				}
				require.ErrorIs(t, err, errCrashed, name)
				// Restart from what the emulator acknowledged.
				require.NoError(t, sc.run(inner, inner), "%s: restart", name)
				require.Equal(t, want, stateOf(inner, sc.collection), name)
			}
		}
	}
}
