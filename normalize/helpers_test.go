package normalize

import (
	"context"
	"flag"
	"sync"
	"testing"
	"time"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"
	"github.com/stretchr/testify/require"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/upstream/schemastore"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

var seedFlag = flag.Int64("seed", 0, "seed for randomized tests (0 = time based)")

func testSeed(t *testing.T) int64 {
	s := *seedFlag
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("seed=%d (rerun with -seed=%d)", s, s)
	return s
}

func ci(s string) model.CIStr { return model.CIStr{O: s, L: lower(s)} }

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}

type colDef struct {
	name    string
	tp      byte
	flen    int
	flag    uint
	charset string
}

func column(id int64, off int, d colDef) *model.ColumnInfo {
	ft := types.NewFieldType(d.tp)
	ft.SetFlag(d.flag)
	if d.flen != 0 {
		ft.SetFlen(d.flen)
	}
	cs := d.charset
	if cs == "" {
		cs = "utf8mb4"
	}
	ft.SetCharset(cs)
	if cs == "binary" {
		ft.SetCollate("binary")
	} else {
		ft.SetCollate("utf8mb4_bin")
	}
	return &model.ColumnInfo{ID: id, Name: ci(d.name), Offset: off, FieldType: *ft, State: model.StatePublic}
}

// intPKTable: id BIGINT PRIMARY KEY (handle), title VARCHAR(255), n INT.
func intPKTable(id int64, name string, extra ...colDef) *model.TableInfo {
	defs := append([]colDef{
		{name: "id", tp: mysql.TypeLonglong, flag: mysql.PriKeyFlag | mysql.NotNullFlag},
		{name: "title", tp: mysql.TypeVarchar, flen: 255},
		{name: "n", tp: mysql.TypeLong},
	}, extra...)
	ti := &model.TableInfo{ID: id, Name: ci(name), PKIsHandle: true, State: model.StatePublic, UpdateTS: uint64(len(defs))}
	for i, d := range defs {
		ti.Columns = append(ti.Columns, column(int64(i+1), i, d))
	}
	ti.MaxColumnID = int64(len(defs))
	return ti
}

// fakeRow is a ColumnSource over datums by column offset.
type fakeRow map[int]value.Datum

func (r fakeRow) Column(offset int, _ *minicdc.ColumnInfo) (minicdc.Value, error) {
	return minicdc.Value(r[offset]), nil
}

// row builds the image of intPKTable: id, title, n.
func row(id int64, title string, n int64) fakeRow {
	return fakeRow{0: value.NewIntDatum(id), 1: value.NewStringDatum(title), 2: value.NewIntDatum(n)}
}

type harness struct {
	t    *testing.T
	sink *fakeSink
	b    *Bridge
	ti   map[int64]*model.TableInfo
	ctx  context.Context
}

func newHarness(t *testing.T, sink *fakeSink, cfg Config) *harness {
	t.Helper()
	if cfg.ClientID == "" {
		cfg.ClientID = "adapter-1"
	}
	if cfg.StartTs == 0 {
		cfg.StartTs = 100
	}
	b, err := New(cfg, sink)
	require.NoError(t, err)
	_, err = b.Open(context.Background())
	require.NoError(t, err)
	h := &harness{t: t, sink: sink, b: b, ti: map[int64]*model.TableInfo{}, ctx: context.Background()}
	for _, tb := range cfg.Tables {
		h.ti[tb.PhysicalID] = modelOf(tb.Info)
	}
	return h
}

func (h *harness) upsert(table int64, ts uint64, r fakeRow) {
	h.t.Helper()
	require.NoError(h.t, h.b.AddRow(h.ctx, RowInput{TableID: table, CommitTs: ts, RowType: minicdc.RowTypeInsert, Post: r, TableInfo: mt(h.ti[table])}))
}

func (h *harness) del(table int64, ts uint64, r fakeRow) {
	h.t.Helper()
	require.NoError(h.t, h.b.AddRow(h.ctx, RowInput{TableID: table, CommitTs: ts, RowType: minicdc.RowTypeDelete, Pre: r, TableInfo: mt(h.ti[table])}))
}

func (h *harness) checkpoint(m map[int64]uint64) {
	h.t.Helper()
	require.NoError(h.t, h.b.Checkpoint(h.ctx, m))
}

// models remembers the schema model each converted definition came from,
// so tests can build DDL events from a table a Config names.
var models sync.Map // *minicdc.TableInfo -> *model.TableInfo

// mt is the runtime's definition of a test table model.
func mt(ti *model.TableInfo) *minicdc.TableInfo {
	m := minicdc.NewTableInfo(ti)
	if m != nil {
		models.Store(m, ti)
	}
	return m
}

func modelOf(t *minicdc.TableInfo) *model.TableInfo {
	if v, ok := models.Load(t); ok {
		return v.(*model.TableInfo)
	}
	return nil
}

// ddlOf is the runtime's DDL for a schema store event (no pre-DDL table:
// the bridge does not read it).
func ddlOf(ev *schemastore.DDLEvent) minicdc.DDL {
	d := minicdc.NewDDL(ev, nil)
	if d.Table != nil {
		models.Store(d.Table, ev.TableInfo)
	}
	for i, t := range d.MultipleTables {
		if t != nil {
			models.Store(t, ev.MultipleTableInfos[i])
		}
	}
	return d
}

func (h *harness) ddl(ev *schemastore.DDLEvent) {
	h.t.Helper()
	require.NoError(h.t, h.b.DDL(h.ctx, ddlOf(ev)))
}

// mutations returns every ingested mutation of partition in send order.
func (s *fakeSink) mutationsOf(partition string) []*apiv1.Mutation {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*apiv1.Mutation
	for _, b := range s.batches {
		if b.GetSourcePartition() == partition {
			out = append(out, b.GetMutations()...)
		}
	}
	return out
}
