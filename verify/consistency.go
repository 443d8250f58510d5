// Package verify checks a mirror against its upstream: it reads each table
// by snapshot at a ts, the way the adapter reads the upstream, and compares
// it with the collection's documents field by field (M49, SR3). The binary
// (`sfemu run`'s check endpoint), the end-to-end tests and a simulator use
// the same check; it depends on no particular kind of upstream, only on a
// snapshot reader.
package verify

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/mounter"
	"github.com/searchfabric/sfemu/upstream/schemastore"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// TableRef names an upstream table and the collection it is mirrored
// into. The adapter's configured tables are of this type, so a table set
// is checked as it was configured.
type TableRef struct {
	DB, Table string
	// Collection overrides the collection the table is mirrored into
	// (default normalize.DefaultCollectionName(DB, Table)); a renamed
	// table keeps the collection it was mirrored into under its old name.
	Collection string
}

func (t TableRef) String() string { return t.DB + "." + t.Table }

// CollectionName is the collection the table is mirrored into.
func (t TableRef) CollectionName() string {
	if t.Collection != "" {
		return t.Collection
	}
	return normalize.DefaultCollectionName(t.DB, t.Table)
}

// Diff is one difference between an upstream table at a ts and its
// collection.
type Diff struct {
	Table      TableRef
	Collection string
	// Key is the document's canonical primary key (E14), "" for
	// table-level diffs.
	Key string
	// Field, Expected and Actual are set for a field whose value differs:
	// Expected is the upstream value, Actual the collection's, both as the
	// emulator value it is (or should be) stored as.
	Field            string
	Expected, Actual string
	What             string
}

func (d Diff) String() string {
	if d.Key == "" {
		return fmt.Sprintf("%s (collection %s): %s", d.Table, d.Collection, d.What)
	}
	return fmt.Sprintf("%s (collection %s) pk=%s: %s", d.Table, d.Collection, d.Key, d.What)
}

// WaitSafe waits until every collection of tables has safe_ts >= ts, or
// timeout passes (then it returns an error naming the lagging collection).
func WaitSafe(ctx context.Context, emu *emulator.Emulator, tables []TableRef, ts uint64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, ref := range tables {
		name := ref.CollectionName()
		for {
			st, err := emu.GetCollection(ctx, &apiv1.GetCollectionRequest{Name: name})
			if err == nil && st.GetSafeTs() >= ts {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("verify: collection %q safe_ts %d did not reach %d within %v (last error: %v)",
					name, st.GetSafeTs(), ts, timeout, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return nil
}

// CheckConsistency compares each table, read from the upstream by snapshot
// at ts, with its collection's documents, exactly: the same set of primary
// keys, and for every field the same value, where the upstream row is
// lowered through the normalize bridge's own conversion
// (normalize.RowDocument), so decimals, times, JSON, vectors, enums, sets,
// bits and floats compare as the emulator stores them. A field missing
// from a document written before an ADD COLUMN matches the column's origin
// default (emulator contract E28); a field the upstream row does not have
// is a difference. The collection must have safe_ts >= ts and the upstream
// no changes after ts.
//
// The upstream side is read through snap (ReadTableAt), so it works with
// every kind of upstream: in process, over the embedded gRPC servers and
// against a real cluster (M49, SR3).
func CheckConsistency(ctx context.Context, snap kvevent.SnapshotReader, emu *emulator.Emulator, tables []TableRef, ts uint64) ([]Diff, error) {
	var diffs []Diff
	for _, ref := range tables {
		d, err := checkTable(ctx, snap, emu, ref, ts)
		if err != nil {
			return nil, err
		}
		diffs = append(diffs, d...)
	}
	sort.Slice(diffs, func(i, j int) bool { return diffs[i].String() < diffs[j].String() })
	return diffs, nil
}

// checkTable compares one table with its collection a page of rows at a
// time (V1): each upstream row is looked up in the collection by key, then
// the collection is scanned page by page for documents no row produced.
// What it holds is a page of rows and the set of keys seen, not both
// sides of the table: a check of a table of millions of rows must not
// need gigabytes.
func checkTable(ctx context.Context, snap kvevent.SnapshotReader, emu *emulator.Emulator, ref TableRef, ts uint64) ([]Diff, error) {
	var diffs []Diff
	coll := ref.CollectionName()
	seen := map[string]struct{}{}
	var cols map[string]*model.ColumnInfo
	var table *minicdc.TableInfo
	var docs normalize.DocumentBuilder
	err := scanTableAt(ctx, snap, ref.DB, ref.Table, ts, func(at *TableAt) error {
		if table == nil {
			table = minicdc.NewTableInfo(at.Table)
			cols = map[string]*model.ColumnInfo{}
			for _, c := range at.Table.Columns {
				cols[c.Name.O] = c
			}
		}
		for _, row := range at.Rows {
			pk, want, err := docs.Row(table, row.Key, minicdc.ValuesOf(row.Values))
			if err != nil {
				return fmt.Errorf("verify: %s row %x: %w", ref, row.Key, err)
			}
			// A copy: pk is carved from the page's value slabs, which a
			// kept substring would hold alive for the whole check.
			seen[strings.Clone(pk)] = struct{}{}
			resp, err := emu.GetDocument(ctx, &apiv1.GetDocumentRequest{Collection: coll, PrimaryKey: pk})
			if err != nil {
				return fmt.Errorf("verify: reading %q key %s: %w", coll, pk, err)
			}
			if !resp.GetFound() {
				diffs = append(diffs, Diff{Table: ref, Collection: coll, Key: pk, What: "row missing from the collection"})
				continue
			}
			diffs = append(diffs, fieldDiffs(ref, coll, pk, cols, row, want, resp.GetDocument().GetFields())...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	after := ""
	for {
		page, _, err := emu.Scan(ctx, coll, nil, after, documentPage)
		if err != nil {
			return nil, fmt.Errorf("verify: scanning %q: %w", coll, err)
		}
		for _, d := range page {
			if _, ok := seen[d.PrimaryKey]; !ok {
				diffs = append(diffs, Diff{Table: ref, Collection: coll, Key: d.PrimaryKey, What: "document has no upstream row"})
			}
		}
		if len(page) < documentPage {
			return diffs, nil
		}
		after = page[len(page)-1].PrimaryKey
	}
}

// documentPage is the page size of the collection scans.
const documentPage = 1000

// fieldDiffs compares one upstream row's expected fields with the
// document's.
func fieldDiffs(ref TableRef, coll, pk string, cols map[string]*model.ColumnInfo, row TableRow, want, got map[string]*apiv1.Value) []Diff {
	var diffs []Diff
	for _, name := range sortedNames(want) {
		w := want[name]
		g, ok := got[name]
		if !ok {
			// E28: an ADDITIVE schema change keeps documents as
			// stored, so a row untouched since an ADD COLUMN has
			// no field for it while upstream reads the column's
			// origin default (or NULL).
			if c := cols[name]; c != nil && datumText(row.Values[c.Offset]) == originDefaultText(c) {
				continue
			}
			diffs = append(diffs, Diff{Table: ref, Collection: coll, Key: pk, Field: name, Expected: ValueText(w), Actual: "<absent>",
				What: fmt.Sprintf("field %q missing, expected %s", name, ValueText(w))})
			continue
		}
		if !proto.Equal(w, g) {
			diffs = append(diffs, Diff{Table: ref, Collection: coll, Key: pk, Field: name, Expected: ValueText(w), Actual: ValueText(g),
				What: fmt.Sprintf("field %q: expected %s, actual %s", name, ValueText(w), ValueText(g))})
		}
	}
	for _, name := range sortedNames(got) {
		if _, ok := want[name]; !ok {
			diffs = append(diffs, Diff{Table: ref, Collection: coll, Key: pk, Field: name, Expected: "<absent>", Actual: ValueText(got[name]),
				What: fmt.Sprintf("field %q = %s is not a column of the upstream row", name, ValueText(got[name]))})
		}
	}
	return diffs
}

func sortedNames(m map[string]*apiv1.Value) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Documents reads every document of collection coll, in primary-key
// order, page by page.
func Documents(ctx context.Context, emu *emulator.Emulator, coll string) ([]*apiv1.Document, error) {
	var out []*apiv1.Document
	after := ""
	for {
		page, _, err := emu.Scan(ctx, coll, nil, after, 1000)
		if err != nil {
			return nil, fmt.Errorf("verify: scanning %q: %w", coll, err)
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out, nil
		}
		after = page[len(page)-1].PrimaryKey
	}
}

// datumText is a datum's canonical text ("NULL" for SQL NULL).
func datumText(d value.Datum) string {
	if d.Kind() == value.KindNull {
		return "NULL"
	}
	b, err := d.AppendText(nil)
	if err != nil {
		return fmt.Sprintf("<%s: %v>", d.Kind(), err)
	}
	return string(b)
}

// ValueText renders an emulator value for diff messages; it tells kinds
// apart (a string "1" is not the integer 1).
func ValueText(v *apiv1.Value) string {
	switch k := v.GetKind().(type) {
	case nil, *apiv1.Value_NullValue:
		return "NULL"
	case *apiv1.Value_Int64Value:
		return "int " + strconv.FormatInt(k.Int64Value, 10)
	case *apiv1.Value_Uint64Value:
		return "uint " + strconv.FormatUint(k.Uint64Value, 10)
	case *apiv1.Value_StringValue:
		return "string " + strconv.Quote(k.StringValue)
	case *apiv1.Value_BytesValue:
		return fmt.Sprintf("bytes %x", k.BytesValue)
	case *apiv1.Value_DoubleValue:
		return "double " + strconv.FormatFloat(k.DoubleValue, 'g', -1, 64)
	case *apiv1.Value_BoolValue:
		return "bool " + strconv.FormatBool(k.BoolValue)
	case *apiv1.Value_JsonValue:
		return "json " + k.JsonValue
	case *apiv1.Value_VectorValue:
		return fmt.Sprintf("vector %v", k.VectorValue.GetValues())
	default:
		return fmt.Sprintf("%v", v)
	}
}

// originDefaultText renders the value rows written before the column
// existed read as.
func originDefaultText(col *model.ColumnInfo) string {
	if col.OriginDefaultValue == nil {
		return "NULL"
	}
	return fmt.Sprint(col.OriginDefaultValue)
}

// TableRow is one row of a table read by snapshot.
type TableRow struct {
	PhysicalID int64
	Key        []byte
	// Values holds the row's datums by column offset (owned).
	Values []value.Datum
}

// TableAt is a table as it was at a ts.
type TableAt struct {
	SchemaID int64
	Table    *model.TableInfo
	// Rows in key order (partition by partition, each in handle order).
	Rows []TableRow
}

// snapshotPage is the page size of ReadTableAt's record scans.
const snapshotPage = 4096

// ReadTableAt reads db.table at ts through r the way the adapter reads
// the upstream: the TableInfo from the meta keys at ts
// (schemastore.LookupTable), then every physical table's record span at
// ts, page by page, each row decoded by the mounter with that TableInfo.
// A table that does not exist at ts, a ts below the GC safe point and a
// row that does not decode are errors naming the table and the ts.
func ReadTableAt(ctx context.Context, r kvevent.SnapshotReader, db, table string, ts uint64) (*TableAt, error) {
	var out *TableAt
	err := scanTableAt(ctx, r, db, table, ts, func(page *TableAt) error {
		if out == nil {
			out = &TableAt{SchemaID: page.SchemaID, Table: page.Table}
		}
		out.Rows = append(out.Rows, page.Rows...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanTableAt is ReadTableAt a page at a time: fn gets the table and the
// next page of rows (at least once, with no rows for an empty table);
// the rows are fn's to keep.
func scanTableAt(ctx context.Context, r kvevent.SnapshotReader, db, table string, ts uint64, fn func(page *TableAt) error) error {
	ti, schemaID, err := schemastore.LookupTable(ctx, r, ts, db, table)
	if err != nil {
		return err
	}
	m := mounter.New(mounter.Config{})
	var rc mounter.RowChange
	called := false
	for _, phys := range ti.PhysicalIDs() {
		start := tablecodec.EncodeRecordPrefix(nil, phys)
		end := tablecodec.PrefixNext(start)
		for {
			kvs, err := r.Scan(ctx, start, end, ts, snapshotPage)
			if err != nil {
				return fmt.Errorf("verify: read %s.%s (physical table %d) at ts %d: %w", db, table, phys, ts, err)
			}
			page := &TableAt{SchemaID: schemaID, Table: ti, Rows: make([]TableRow, 0, len(kvs))}
			for _, kv := range kvs {
				entry := kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: kv.Key, Value: kv.Value, CRTs: ts}
				if err := m.Decode(&entry, ti, &rc); err != nil {
					return fmt.Errorf("verify: decode row %x of %s.%s at ts %d: %w", kv.Key, db, table, ts, err)
				}
				ds, err := rc.Row.Datums(nil)
				if err != nil {
					return fmt.Errorf("verify: row %x of %s.%s at ts %d: %w", kv.Key, db, table, ts, err)
				}
				for i := range ds {
					ds[i] = ds[i].Clone()
				}
				page.Rows = append(page.Rows, TableRow{PhysicalID: phys, Key: bytes.Clone(kv.Key), Values: ds})
			}
			if len(page.Rows) > 0 || !called {
				called = true
				if err := fn(page); err != nil {
					return err
				}
			}
			if len(kvs) < snapshotPage {
				break
			}
			start = append(bytes.Clone(kvs[len(kvs)-1].Key), 0)
		}
	}
	if !called {
		return fn(&TableAt{SchemaID: schemaID, Table: ti})
	}
	return nil
}

// CheckNow takes clock's current ts, waits (up to wait) until every
// collection of tables has safe_ts at it, and compares the tables read
// through snap at that ts with their collections (CheckConsistency). It
// returns the ts it checked at.
func CheckNow(ctx context.Context, clock kvevent.Clock, snap kvevent.SnapshotReader, emu *emulator.Emulator, tables []TableRef, wait time.Duration) (uint64, []Diff, error) {
	ts, err := clock.CurrentTs(ctx)
	if err != nil {
		return ts, nil, err
	}
	if err := WaitSafe(ctx, emu, tables, ts, wait); err != nil {
		return ts, nil, err
	}
	diffs, err := CheckConsistency(ctx, snap, emu, tables, ts)
	return ts, diffs, err
}
