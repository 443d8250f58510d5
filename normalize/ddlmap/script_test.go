package ddlmap

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
)

// TestScripts runs the mapping cases in testdata/*.txt: a collection's
// lineage and a DDL in, the scope decision (N25), the partitions removed
// and added (N34) and the schema request (N26, N27) out. Each case cites
// its rule.
//
// Commands (input lines are columns: "<name> <type> [pk]", types bigint,
// int, uint, varchar <n>, text, blob, json, double, decimal, datetime,
// vector <dim>):
//
//	collection name=shop.items logical=42 schema-id=1 db=shop parts=(42) [retired=(..)] [active version=5 token=g5]
//	ddl job=9 ts=150 version=6 action=add-column table=42 [schema-id=1] [schema=shop]
//	    [dropped=(..)] [added=(..)] [post-id=42] [post-name=items] [post-parts=(101,102)] [no-post]
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var c *Collection
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "collection":
				c = &Collection{Source: SourceInfo{}}
				d.ScanArgs(t, "name", &c.Name)
				d.ScanArgs(t, "logical", &c.LogicalID)
				d.MaybeScanArgs(t, "schema-id", &c.SchemaID)
				d.MaybeScanArgs(t, "db", &c.Source.Database)
				c.Source.LogicalTableID = c.LogicalID
				c.Source.Table = c.Name[strings.IndexByte(c.Name, '.')+1:]
				retired := map[int64]bool{}
				for _, id := range ids(t, d, "retired") {
					retired[id] = true
				}
				for _, id := range ids(t, d, "parts") {
					c.Partitions = append(c.Partitions, Partition{ID: id, Name: apiv1.PartitionName(0, id), Retired: retired[id]})
				}
				if d.HasArg("active") {
					c.Active = true
					d.ScanArgs(t, "version", &c.Version)
					d.ScanArgs(t, "token", &c.Token)
					ti := table(t, d, c.LogicalID, c.Source.Table, nil)
					s, err := BuildShape(ti, nil)
					if err != nil {
						return "error: " + err.Error()
					}
					var live []string
					for _, p := range c.Partitions {
						if !p.Retired {
							live = append(live, p.Name)
						}
					}
					c.Def = Definition(c.Name, s, c.Source, live, true)
				}
				return "ok"
			case "ddl":
				ev := &minicdc.DDL{}
				var action string
				d.ScanArgs(t, "job", &ev.JobID)
				d.ScanArgs(t, "ts", &ev.FinishedTs)
				d.ScanArgs(t, "version", &ev.SchemaVersion)
				d.ScanArgs(t, "action", &action)
				d.ScanArgs(t, "table", &ev.TableID)
				d.MaybeScanArgs(t, "schema-id", &ev.SchemaID)
				d.MaybeScanArgs(t, "schema", &ev.SchemaName)
				ev.Action = actionOf(t, d, action)
				ev.DroppedTableIDs = ids(t, d, "dropped")
				for _, id := range ids(t, d, "added") {
					ev.AddedTables = append(ev.AddedTables, minicdc.AddedTable{SchemaID: ev.SchemaID, TableID: id})
				}
				if !d.HasArg("no-post") {
					postID, postName := ev.TableID, c.Source.Table
					d.MaybeScanArgs(t, "post-id", &postID)
					d.MaybeScanArgs(t, "post-name", &postName)
					ev.Table = table(t, d, postID, postName, ids(t, d, "post-parts"))
				}
				return render(ev, c)
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

func render(ev *minicdc.DDL, c *Collection) string {
	var b strings.Builder
	if !Affects(ev, c) {
		return "affects=false\n"
	}
	var dropped []string
	for _, p := range c.Partitions {
		if Dropped(ev, c)[p.Name] {
			dropped = append(dropped, p.Name)
		}
	}
	fmt.Fprintf(&b, "affects=true dropped=%v added=%v\n", dropped, Added(ev, c))
	req, _, skip, err := Request(Config{ClientID: "adapter-1", MetadataAux: true}, ev, c)
	switch {
	case err != nil:
		fmt.Fprintf(&b, "error: %v\n", err)
	case skip:
		b.WriteString("skip\n")
	default:
		def := req.GetDefinition()
		fmt.Fprintf(&b, "%s version=%d fence=%d/%s ts=%d key=%s\n", strings.TrimPrefix(req.GetUpdatePolicy().String(), "SCHEMA_UPDATE_POLICY_"),
			req.GetSchemaVersion(), req.GetFence().GetExpectedPrevSchemaVersion(), req.GetFence().GetSchemaGenerationToken(),
			req.GetScope().GetDdlCommitTs(), req.GetMeta().GetIdempotencyKey())
		src := def.GetSource()
		fmt.Fprintf(&b, "source=%s.%s#%d parts=%v pk=%v\n", src.GetDatabase(), src.GetTable(), src.GetLogicalTableId(), def.GetSourcePartitions(), def.GetPrimaryKey())
		var fields []string
		for _, f := range def.GetFields() {
			fields = append(fields, fmt.Sprintf("%s:%s:%s", f.GetName(), strings.TrimPrefix(f.GetType().String(), "FIELD_TYPE_"),
				strings.TrimPrefix(f.GetRole().String(), "FIELD_ROLE_")))
		}
		fmt.Fprintf(&b, "fields=%s\n", strings.Join(fields, " "))
	}
	return b.String()
}

func ids(t *testing.T, d *datadriven.TestData, key string) []int64 {
	arg, ok := d.Arg(key)
	if !ok {
		return nil
	}
	var out []int64
	for _, v := range arg.Vals {
		if strings.TrimSpace(v) == "" {
			continue // key=()
		}
		id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			d.Fatalf(t, "%s: bad id %q", key, v)
		}
		out = append(out, id)
	}
	return out
}

var actions = map[string]minicdc.DDLAction{
	"add-column": minicdc.ActionAddColumn, "drop-column": minicdc.ActionDropColumn, "modify-column": minicdc.ActionModifyColumn,
	"truncate-table": minicdc.ActionTruncateTable, "drop-table": minicdc.ActionDropTable, "drop-schema": minicdc.ActionDropSchema,
	"rename-table": minicdc.ActionRenameTable, "add-partition": minicdc.ActionAddTablePartition,
	"drop-partition": minicdc.ActionDropTablePartition, "truncate-partition": minicdc.ActionTruncateTablePartition,
	"exchange-partition": minicdc.ActionExchangeTablePartition, "create-table": minicdc.ActionCreateTable,
}

func actionOf(t *testing.T, d *datadriven.TestData, name string) minicdc.DDLAction {
	a, ok := actions[name]
	if !ok {
		d.Fatalf(t, "unknown action %q", name)
	}
	return a
}

// table builds a definition from the input lines.
func table(t *testing.T, d *datadriven.TestData, id int64, name string, parts []int64) *minicdc.TableInfo {
	ti := &minicdc.TableInfo{ID: id, Name: minicdc.Name{O: name, L: strings.ToLower(name)}, PartitionIDs: parts}
	for off, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			d.Fatalf(t, "column line %q: want <name> <type> [args] [pk]", line)
		}
		c := &minicdc.ColumnInfo{ID: int64(off + 1), Name: minicdc.Name{O: f[0], L: strings.ToLower(f[0])}, Offset: off, Public: true, Flen: -1}
		rest := f[2:]
		switch f[1] {
		case "bigint", "int":
			c.Type = minicdc.TypeInt
		case "uint":
			c.Type, c.Unsigned = minicdc.TypeInt, true
		case "varchar", "vector":
			c.Type = minicdc.TypeString
			if f[1] == "vector" {
				c.Type = minicdc.TypeVector
			}
			if len(rest) == 0 {
				d.Fatalf(t, "column %s: %s needs a length", f[0], f[1])
			}
			n, err := strconv.Atoi(rest[0])
			if err != nil {
				d.Fatalf(t, "column %s: bad length %q", f[0], rest[0])
			}
			c.Flen, rest = n, rest[1:]
		case "text":
			c.Type = minicdc.TypeBlob
		case "blob":
			c.Type, c.Binary = minicdc.TypeBlob, true
		case "json":
			c.Type = minicdc.TypeJSON
		case "double":
			c.Type = minicdc.TypeDouble
		case "decimal":
			c.Type = minicdc.TypeDecimal
		case "datetime":
			c.Type = minicdc.TypeDatetime
		default:
			d.Fatalf(t, "column %s: unknown type %q", f[0], f[1])
		}
		if len(rest) > 0 && rest[0] == "pk" {
			ti.PrimaryKey = append(ti.PrimaryKey, off)
		}
		ti.Columns = append(ti.Columns, c)
	}
	ti.PKIsHandle = len(ti.PrimaryKey) == 1 && ti.Columns[ti.PrimaryKey[0]].Type == minicdc.TypeInt
	return ti
}
