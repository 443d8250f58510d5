package normalize

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/pingcap/tidb/pkg/parser/mysql"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/upstream/schemastore"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// TestScripts runs the bridge's ordering scenarios in testdata/*.txt:
// callbacks in, emulator calls out (schema requests, batches with their
// seqs, progress), in the order the bridge makes them. Each case cites the
// rule it pins.
//
// Commands:
//
//	open tables=(42,43) [start-ts=100] [max-batch-rows=N]   a bridge over a fresh emulator
//	reopen [start-ts=N]                                     a new bridge (next run) over the same emulator
//	row table=42 ts=110 id=1 [title=a] [n=0] [op=insert|update|delete] [old=<id>]
//	checkpoint 42=120 [43=130]
//	ddl job=9 ts=150 version=6 table=42 add=<column>        ADD COLUMN <column> INT
//	ddl job=9 ts=150 version=6 table=42 drop                DROP TABLE
//
// Every command prints the emulator calls it caused, or "error: ...".
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var s scriptRun
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return s.run(t, d)
		})
	})
}

type scriptRun struct {
	sink   *fakeSink
	b      *Bridge
	tables map[int64]*model.TableInfo
	ids    []int64
	cfg    Config
	seen   int // sink calls already printed
	counts map[string]int
}

func (s *scriptRun) run(t *testing.T, d *datadriven.TestData) string {
	ctx := context.Background()
	var err error
	switch d.Cmd {
	case "open", "reopen":
		if d.Cmd == "open" {
			s.sink, s.tables, s.ids, s.seen, s.counts = newFakeSink(), map[int64]*model.TableInfo{}, nil, 0, map[string]int{}
			arg, ok := d.Arg("tables")
			if !ok {
				d.Fatalf(t, "open needs tables=(...)")
			}
			for _, v := range arg.Vals {
				id, perr := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if perr != nil {
					d.Fatalf(t, "bad table id %q", v)
				}
				s.tables[id] = intPKTable(id, fmt.Sprintf("t%d", id))
				s.ids = append(s.ids, id)
			}
			s.cfg = Config{ClientID: "adapter-1", StartTs: 100}
			d.MaybeScanArgs(t, "max-batch-rows", &s.cfg.MaxBatchRows)
		}
		d.MaybeScanArgs(t, "start-ts", &s.cfg.StartTs)
		s.cfg.Tables = nil
		for _, id := range s.ids {
			s.cfg.Tables = append(s.cfg.Tables, Table{PhysicalID: id, SchemaID: 1, Database: "shop", Info: mt(s.tables[id])})
		}
		if s.b, err = New(s.cfg, s.sink); err != nil {
			return "error: " + err.Error()
		}
		res, err := s.b.Open(ctx)
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("resume start-ts=%d epoch=%d\n", res.StartTs, res.Epoch) + s.calls()
	case "row":
		var table int64
		var ts uint64
		var id, n int64
		title, op := "x", "insert"
		d.ScanArgs(t, "table", &table)
		d.ScanArgs(t, "ts", &ts)
		d.ScanArgs(t, "id", &id)
		d.MaybeScanArgs(t, "title", &title)
		d.MaybeScanArgs(t, "n", &n)
		d.MaybeScanArgs(t, "op", &op)
		in := RowInput{TableID: table, CommitTs: ts, TableInfo: mt(s.tables[table])}
		img := row(id, title, n)
		switch op {
		case "insert":
			in.RowType, in.Post = minicdc.RowTypeInsert, img
		case "update":
			old := id
			d.MaybeScanArgs(t, "old", &old)
			in.RowType, in.Post, in.Pre = minicdc.RowTypeUpdate, img, row(old, title, n)
		case "delete":
			in.RowType, in.Pre = minicdc.RowTypeDelete, img
		default:
			d.Fatalf(t, "unknown op %q", op)
		}
		err = s.b.AddRow(ctx, in)
	case "checkpoint":
		m := map[int64]uint64{}
		for _, a := range d.CmdArgs {
			id, perr := strconv.ParseInt(a.Key, 10, 64)
			ts, terr := strconv.ParseUint(a.SingleVal(t), 10, 64)
			if perr != nil || terr != nil {
				d.Fatalf(t, "checkpoint wants <table>=<ts>, got %s", a)
			}
			m[id] = ts
		}
		err = s.b.Checkpoint(ctx, m)
	case "ddl":
		var job, table, version int64
		var ts uint64
		d.ScanArgs(t, "job", &job)
		d.ScanArgs(t, "ts", &ts)
		d.ScanArgs(t, "version", &version)
		d.ScanArgs(t, "table", &table)
		var ev *schemastore.DDLEvent
		switch {
		case d.HasArg("add"):
			var col string
			d.ScanArgs(t, "add", &col)
			var next *model.TableInfo
			ev, next = addColumnDDL(s.tables[table], job, ts, version, col, mysql.TypeLong)
			ev.SchemaID, ev.SchemaName = 1, "shop"
			s.tables[table] = next
		case d.HasArg("drop"):
			ev = &schemastore.DDLEvent{JobID: job, Type: int(model.ActionDropTable), TableID: table, SchemaID: 1, SchemaName: "shop",
				SchemaVersion: version, FinishedTs: ts}
		default:
			d.Fatalf(t, "ddl wants add=<column> or drop")
		}
		err = s.b.DDL(ctx, ddlOf(ev))
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	out := s.calls()
	if err != nil {
		out += "error: " + err.Error() + "\n"
	}
	if out == "" {
		return "ok"
	}
	return out
}

// calls renders the sink calls made since the last command, in order.
func (s *scriptRun) calls() string {
	f := s.sink
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, c := range f.calls[s.seen:] {
		kind := c[:strings.IndexByte(c, ':')]
		i := s.counts[kind]
		s.counts[kind]++
		switch kind {
		case "put":
			r := f.puts[i]
			pol := strings.TrimPrefix(r.GetUpdatePolicy().String(), "SCHEMA_UPDATE_POLICY_")
			var fields []string
			for _, fd := range r.GetDefinition().GetFields() {
				fields = append(fields, fd.GetName())
			}
			fmt.Fprintf(&b, "schema %s %s version=%d fence=%d/%s ts=%d key=%s parts=%v fields=%v\n", r.GetScope().GetCollection(), pol,
				r.GetSchemaVersion(), r.GetFence().GetExpectedPrevSchemaVersion(), r.GetFence().GetSchemaGenerationToken(),
				r.GetScope().GetDdlCommitTs(), r.GetMeta().GetIdempotencyKey(), r.GetDefinition().GetSourcePartitions(), fields)
		case "ingest":
			bt := f.batches[i]
			var rows []string
			for _, m := range bt.GetMutations() {
				k := "up"
				if m.GetKind() == apiv1.MutationKind_MUTATION_KIND_DELETE {
					k = "del"
				}
				rows = append(rows, fmt.Sprintf("%d:%d:%s:%s", m.GetSeq(), m.GetCommitTs(), k, m.GetPrimaryKey()))
			}
			last := bt.GetFirstSeq() + uint64(len(bt.GetMutations())) - 1
			fmt.Fprintf(&b, "batch %s epoch=%d seq=%d..%d token=%s %s\n", bt.GetSourcePartition(), bt.GetSourceEpoch(), bt.GetFirstSeq(), last,
				bt.GetSchemaGenerationToken(), strings.Join(rows, " "))
		case "adv":
			p := f.advs[i]
			fmt.Fprintf(&b, "advance %s epoch=%d ts=%d\n", p.GetSourcePartition(), p.GetSourceEpoch(), p.GetResolvedTs())
		default:
			fmt.Fprintf(&b, "%s\n", c)
		}
	}
	s.seen = len(f.calls)
	return b.String()
}
