package mounter

import (
	"errors"
	"strings"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// Test schema helpers.

type colOpt func(*model.ColumnInfo)

func newCol(id int64, name string, tp byte, opts ...colOpt) *model.ColumnInfo {
	c := &model.ColumnInfo{ID: id, Name: model.NewCIStr(name), State: model.StatePublic}
	c.FieldType = *types.NewFieldType(tp)
	switch tp {
	case mysql.TypeVarchar, mysql.TypeString, mysql.TypeBlob:
		c.FieldType.SetCharset("utf8mb4")
		c.FieldType.SetCollate("utf8mb4_bin")
	default:
		c.FieldType.SetCharset("binary")
		c.FieldType.SetCollate("binary")
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func flags(f uint) colOpt         { return func(c *model.ColumnInfo) { c.FieldType.AddFlag(f) } }
func originDefault_(v any) colOpt { return func(c *model.ColumnInfo) { c.OriginDefaultValue = v } }
func collate(coll string) colOpt  { return func(c *model.ColumnInfo) { c.FieldType.SetCollate(coll) } }
func decimalShape(m, d int) colOpt {
	return func(c *model.ColumnInfo) { c.FieldType.SetFlen(m); c.FieldType.SetDecimal(d) }
}
func elems(e ...string) colOpt   { return func(c *model.ColumnInfo) { c.FieldType.SetElems(e) } }
func virtual(expr string) colOpt { return func(c *model.ColumnInfo) { c.GeneratedExprString = expr } }
func state(s model.SchemaState) colOpt {
	return func(c *model.ColumnInfo) { c.State = s }
}

func newTable(id int64, cols ...*model.ColumnInfo) *model.TableInfo {
	ti := &model.TableInfo{ID: id, Name: model.NewCIStr("t"), State: model.StatePublic, Columns: cols}
	for i, c := range cols {
		c.Offset = i
		if c.ID > ti.MaxColumnID {
			ti.MaxColumnID = c.ID
		}
	}
	return ti
}

// pkIntTable: id BIGINT PRIMARY KEY (pk_is_handle), name VARCHAR, n INT.
func pkIntTable(id int64, unsigned bool) *model.TableInfo {
	f := uint(mysql.PriKeyFlag | mysql.NotNullFlag)
	if unsigned {
		f |= mysql.UnsignedFlag
	}
	ti := newTable(id,
		newCol(1, "id", mysql.TypeLonglong, flags(f)),
		newCol(2, "name", mysql.TypeVarchar),
		newCol(3, "n", mysql.TypeLong),
	)
	ti.PKIsHandle = true
	return ti
}

func v2(t testing.TB, ids []int64, ds ...value.Datum) []byte {
	t.Helper()
	b, err := rowcodec.EncodeV2(nil, ids, ds, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func intKey(tableID, h int64) []byte { return tablecodec.EncodeIntRecordKey(nil, tableID, h) }

func str(s string) value.Datum { return value.NewStringDatum(s) }
func i64(v int64) value.Datum  { return value.NewIntDatum(v) }

func mustDecode(t *testing.T, m *Mounter, e *kvevent.RawKVEntry, ti *model.TableInfo) RowChange {
	t.Helper()
	var rc RowChange
	if err := m.Decode(e, ti, &rc); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return rc
}

func colText(t *testing.T, r Row, id int64) string {
	t.Helper()
	d, err := r.Column(id)
	if err != nil {
		t.Fatalf("Column(%d): %v", id, err)
	}
	return d.String()
}

// Rules MT1-MT4: classification by op type and old value length.
func TestClassification(t *testing.T) {
	ti := pkIntTable(10, false)
	newVal := v2(t, []int64{2, 3}, str("new"), i64(2))
	oldVal := v2(t, []int64{2, 3}, str("old"), i64(1))
	m := New(Config{RequireOldValue: true})

	insert := mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(10, 7), Value: newVal}, ti)
	if insert.RowType != RowTypeInsert || insert.Row.IsEmpty() || !insert.PreRow.IsEmpty() || insert.HandleOnly {
		t.Fatalf("insert: %+v", insert)
	}
	if got := colText(t, insert.Row, 2); got != "new" {
		t.Fatalf("insert name %q", got)
	}
	// An empty but non-nil old value is "no old value" (length, not nil).
	insert2 := mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(10, 7), Value: newVal, OldValue: []byte{}}, ti)
	if insert2.RowType != RowTypeInsert {
		t.Fatalf("put with empty old value: %v", insert2.RowType)
	}

	update := mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(10, 7), Value: newVal, OldValue: oldVal}, ti)
	if update.RowType != RowTypeUpdate || update.Row.IsEmpty() || update.PreRow.IsEmpty() {
		t.Fatalf("update: %+v", update)
	}
	if a, b := colText(t, update.PreRow, 2), colText(t, update.Row, 2); a != "old" || b != "new" {
		t.Fatalf("update images %q -> %q", a, b)
	}
	if a, b := colText(t, update.PreRow, 1), colText(t, update.Row, 1); a != "7" || b != "7" {
		t.Fatalf("update handle column %q -> %q", a, b)
	}
	if a, b := update.PreRow.String(), update.Row.String(); a != "{id=7, name=old, n=1}" || b != "{id=7, name=new, n=2}" {
		t.Fatalf("String: %s -> %s", a, b)
	}
	if s := update.Row.String(); (Row{}).String() != "<empty>" || s == "" {
		t.Fatal("empty row String")
	}

	del := mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypeDelete, Key: intKey(10, 7), OldValue: oldVal}, ti)
	if del.RowType != RowTypeDelete || !del.Row.IsEmpty() || del.PreRow.IsEmpty() || del.HandleOnly {
		t.Fatalf("delete: %+v", del)
	}
	if got := colText(t, del.PreRow, 3); got != "1" {
		t.Fatalf("delete old n %q", got)
	}

	// MT4: a delete without old value is a handle-only delete.
	ho := mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypeDelete, Key: intKey(10, 7)}, ti)
	if ho.RowType != RowTypeDelete || !ho.HandleOnly || ho.PreRow.IsEmpty() || !ho.PreRow.HandleOnly() || !ho.Row.IsEmpty() {
		t.Fatalf("handle-only delete: %+v", ho)
	}
	if got := colText(t, ho.PreRow, 1); got != "7" {
		t.Fatalf("handle-only pk %q", got)
	}
	if _, err := ho.PreRow.Column(2); !errors.Is(err, ErrHandleOnly) {
		t.Fatalf("handle-only non-handle column: %v", err)
	}
	var seen []string
	if err := ho.PreRow.ForEach(func(ci *model.ColumnInfo, d value.Datum) error {
		seen = append(seen, ci.Name.O+"="+d.String())
		return nil
	}); err != nil || strings.Join(seen, ",") != "id=7" {
		t.Fatalf("handle-only ForEach %v %v", seen, err)
	}
}

// Rules MT2, MT3, MT15: malformed entries are errors naming the key.
func TestBadEntries(t *testing.T) {
	ti := pkIntTable(10, false)
	val := v2(t, []int64{2}, str("x"))
	m := New(Config{})
	cases := []struct {
		name string
		e    kvevent.RawKVEntry
		ti   *model.TableInfo
		want string
	}{
		{"put without value", kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(10, 1)}, ti, "put without a value"},
		{"unknown op", kvevent.RawKVEntry{OpType: kvevent.OpTypeUnknown, Key: intKey(10, 1), Value: val}, ti, "unknown op type"},
		{"other table", kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(11, 1), Value: val}, ti, "key of table 11"},
		{"index key", kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: tablecodec.EncodeIndexPrefix(nil, 10, 1), Value: val}, ti, "not a record key"},
		{"meta key", kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: []byte("mDBs"), Value: val}, ti, "not a record key"},
		{"no table info", kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(10, 1), Value: val}, nil, "no TableInfo"},
		{"corrupt value", kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(10, 1), Value: []byte{0x80, 0, 5}}, ti, "truncated header"},
		{"corrupt old value", kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(10, 1), Value: val, OldValue: []byte{0x80, 4, 0, 0, 0, 0}}, ti, "unknown flag bits"},
		{"common handle key for int table", kvevent.RawKVEntry{OpType: kvevent.OpTypePut,
			Key: append(tablecodec.EncodeRecordPrefix(nil, 10), 0x03, 0x80, 0, 0, 0, 0, 0, 0, 1), Value: val}, ti, "common handle"},
	}
	var rc0 RowChange
	if err := m.Decode(nil, ti, &rc0); err == nil {
		t.Fatal("nil entry accepted")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var rc RowChange
			err := m.Decode(&c.e, c.ti, &rc)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want containing %q", err, c.want)
			}
			if !strings.Contains(err.Error(), "mounter: key ") {
				t.Fatalf("error does not name the key: %v", err)
			}
			if rc.RowType != RowTypeUnknown || !rc.Row.IsEmpty() || !rc.PreRow.IsEmpty() || rc.RowKey != nil {
				t.Fatalf("failed Decode left a partial result: %+v", rc)
			}
		})
	}
}

// Rule MT6: RowKey is an owned copy of the entry's key, keyspace prefix
// included; it survives later Decodes and changes to the entry's bytes.
func TestRowKeyOwnedAndKeyspace(t *testing.T) {
	ti := pkIntTable(10, false)
	m := New(Config{})
	key := tablecodec.AppendKeyspacePrefix(nil, 271828)
	key = append(key, intKey(10, 5)...)
	e := &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: key, Value: v2(t, []int64{2}, str("a"))}
	rc := mustDecode(t, m, e, ti)
	want := string(key)
	if string(rc.RowKey) != want || rc.TableID != 10 {
		t.Fatalf("row key %x table %d", rc.RowKey, rc.TableID)
	}
	if got := colText(t, rc.Row, 1); got != "5" {
		t.Fatalf("handle %q", got)
	}
	key[len(key)-1] ^= 0xff
	for i := 0; i < 2000; i++ { // fill and roll over the key slab
		e2 := &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(10, int64(i)), Value: e.Value}
		mustDecode(t, m, e2, ti)
	}
	if string(rc.RowKey) != want {
		t.Fatalf("row key changed under the caller: %x", rc.RowKey)
	}
	// Appending to a returned key must not clobber a neighbour.
	rc1 := mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(10, 1), Value: e.Value}, ti)
	rc2 := mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(10, 2), Value: e.Value}, ti)
	_ = append(rc1.RowKey, 0xAA, 0xBB)
	if string(rc2.RowKey) != string(intKey(10, 2)) {
		t.Fatalf("append to one key changed the next: %x", rc2.RowKey)
	}
}

// Rule MT8: views are borrowed; using one after the next Decode fails
// loudly instead of reading another row.
func TestStaleRow(t *testing.T) {
	ti := pkIntTable(10, false)
	m := New(Config{})
	rc1 := mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(10, 1), Value: v2(t, []int64{2}, str("a"))}, ti)
	mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(10, 2), Value: v2(t, []int64{2}, str("b"))}, ti)
	if _, err := rc1.Row.Column(2); !errors.Is(err, ErrStaleRow) {
		t.Fatalf("stale Column: %v", err)
	}
	if err := rc1.Row.ForEach(func(*model.ColumnInfo, value.Datum) error { return nil }); !errors.Is(err, ErrStaleRow) {
		t.Fatalf("stale ForEach: %v", err)
	}
	if _, err := rc1.Row.Datums(nil); !errors.Is(err, ErrStaleRow) {
		t.Fatalf("stale Datums: %v", err)
	}
}

// Rule MT7: int handles rebuild the pk_is_handle column, unsigned flag
// respected; `_tidb_rowid` tables expose the handle as ExtraHandleID.
func TestIntHandleRebuild(t *testing.T) {
	m := New(Config{})
	ti := pkIntTable(10, true)
	rc := mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(10, -1), Value: v2(t, []int64{2}, str("a"))}, ti)
	if got := colText(t, rc.Row, 1); got != "18446744073709551615" {
		t.Fatalf("unsigned handle %q", got)
	}
	ti2 := pkIntTable(11, false)
	rc = mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(11, -1), Value: v2(t, []int64{2}, str("a"))}, ti2)
	if got := colText(t, rc.Row, 1); got != "-1" {
		t.Fatalf("signed handle %q", got)
	}

	rowid := newTable(12, newCol(1, "a", mysql.TypeLong), newCol(2, "b", mysql.TypeVarchar))
	rc = mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(12, 99), Value: v2(t, []int64{1, 2}, i64(5), str("x"))}, rowid)
	if got := colText(t, rc.Row, model.ExtraHandleID); got != "99" {
		t.Fatalf("_tidb_rowid %q", got)
	}
	if got := colText(t, rc.Row, 1); got != "5" {
		t.Fatalf("a %q", got)
	}
	if _, err := rc.Row.Column(77); !errors.Is(err, ErrUnknownColumn) {
		t.Fatalf("unknown column: %v", err)
	}
	if _, err := rc.Row.Column(model.ExtraHandleID); err != nil {
		t.Fatal(err)
	}
	// Tables keyed by an int PK have no _tidb_rowid.
	rc = mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(11, 3), Value: v2(t, []int64{2}, str("a"))}, ti2)
	if _, err := rc.Row.Column(model.ExtraHandleID); !errors.Is(err, ErrUnknownColumn) {
		t.Fatalf("_tidb_rowid on pk table: %v", err)
	}
}

// commonTable: PRIMARY KEY (k VARCHAR collate, n INT) CLUSTERED, v VARCHAR.
func commonTable(id int64, kColl string) *model.TableInfo {
	ti := newTable(id,
		newCol(1, "k", mysql.TypeVarchar, flags(mysql.PriKeyFlag|mysql.NotNullFlag), collate(kColl)),
		newCol(2, "n", mysql.TypeLong, flags(mysql.PriKeyFlag|mysql.NotNullFlag)),
		newCol(3, "v", mysql.TypeVarchar),
	)
	ti.IsCommonHandle = true
	ti.CommonHandleVersion = 1
	ti.Indices = []*model.IndexInfo{{ID: 1, Name: model.NewCIStr("PRIMARY"), Primary: true, Unique: true, State: model.StatePublic,
		Columns: []*model.IndexColumn{{Name: model.NewCIStr("k"), Offset: 0, Length: -1}, {Name: model.NewCIStr("n"), Offset: 1, Length: -1}}}}
	return ti
}

func commonKey(t *testing.T, tableID int64, k string, n int64) []byte {
	h, err := tablecodec.CommonHandleFromDatums(value.NewBytesDatum([]byte(k)), value.NewIntDatum(n))
	if err != nil {
		t.Fatal(err)
	}
	return tablecodec.EncodeRecordKey(nil, tableID, h)
}

// Rule MT7: common handle columns absent from the value are decoded from
// the key; a lossy key form (weight collation) is an error, never a guess.
func TestCommonHandleRebuild(t *testing.T) {
	m := New(Config{})
	ti := commonTable(20, "utf8mb4_bin")
	key := commonKey(t, 20, "abc", 42)
	// TiDB writes k (restore data) and v; n comes from the key.
	rc := mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: key, Value: v2(t, []int64{1, 3}, str("abc"), str("val"))}, ti)
	if a, b, c := colText(t, rc.Row, 1), colText(t, rc.Row, 2), colText(t, rc.Row, 3); a != "abc" || b != "42" || c != "val" {
		t.Fatalf("row %q %q %q", a, b, c)
	}
	// Handle-only delete: both PK columns from the key.
	rc = mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypeDelete, Key: key}, ti)
	if a, b := colText(t, rc.PreRow, 1), colText(t, rc.PreRow, 2); a != "abc" || b != "42" {
		t.Fatalf("handle-only %q %q", a, b)
	}
	ds, err := rc.PreRow.Datums(nil)
	if err != nil || ds[0].String() != "abc" || ds[1].String() != "42" || !ds[2].IsNull() {
		t.Fatalf("handle-only Datums %v %v", ds, err)
	}
	// A general_ci key holds weights, not the text.
	ci := commonTable(21, "utf8mb4_general_ci")
	rc = mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypeDelete, Key: commonKey(t, 21, "abc", 1)}, ci)
	if _, err := rc.PreRow.Column(1); err == nil || !strings.Contains(err.Error(), "cannot be turned back") {
		t.Fatalf("lossy key column: %v", err)
	}
	if got := colText(t, rc.PreRow, 2); got != "1" {
		t.Fatalf("int part of a lossy handle %q", got)
	}
	// An int-handle key for a clustered table is an error.
	var out RowChange
	if err := m.Decode(&kvevent.RawKVEntry{OpType: kvevent.OpTypeDelete, Key: intKey(20, 1)}, ti, &out); err == nil {
		t.Fatal("int key accepted for a common-handle table")
	}
}

// Rules MT10-MT12: columns the row does not store take the origin default,
// else NULL, else (NOT NULL, no default) the type's zero value.
func TestMissingColumnsDefaults(t *testing.T) {
	ti := newTable(30,
		newCol(1, "a", mysql.TypeLong),
		newCol(2, "with_default", mysql.TypeLong, originDefault_("7")),
		newCol(3, "nullable", mysql.TypeVarchar),
		newCol(4, "notnull_int", mysql.TypeLong, flags(mysql.NotNullFlag)),
		newCol(5, "notnull_str", mysql.TypeVarchar, flags(mysql.NotNullFlag)),
		newCol(6, "notnull_enum", mysql.TypeEnum, flags(mysql.NotNullFlag), elems("x", "y"), collate("utf8mb4_bin")),
		newCol(7, "dec", mysql.TypeNewDecimal, decimalShape(10, 2), originDefault_("1.5")),
		newCol(8, "dt", mysql.TypeDatetime, originDefault_("2020-01-02 03:04:05")),
		newCol(9, "en", mysql.TypeEnum, elems("a", "b"), originDefault_("b"), collate("utf8mb4_bin")),
		newCol(10, "st", mysql.TypeSet, elems("a", "b", "c"), originDefault_("a,c"), collate("utf8mb4_bin")),
		newCol(11, "bits", mysql.TypeBit, func(c *model.ColumnInfo) {
			c.FieldType.SetFlen(12)
			c.OriginDefaultValue = "\x01\x02"
			c.OriginDefaultBit = []byte{0x01, 0x02}
		}),
		newCol(12, "dbl", mysql.TypeDouble, originDefault_(float64(2.5))),
		newCol(13, "js", mysql.TypeJSON, originDefault_(`{"a": 1}`)),
		newCol(14, "bad", mysql.TypeLong, originDefault_("not a number")),
		newCol(15, "tm", mysql.TypeDuration, originDefault_("-01:02:03")),
		newCol(16, "u", mysql.TypeLonglong, flags(mysql.UnsignedFlag), originDefault_("18446744073709551615")),
	)
	m := New(Config{})
	rc := mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(30, 1), Value: v2(t, []int64{1}, i64(1))}, ti)
	want := map[int64]string{
		1: "1", 2: "7", 3: "NULL", 4: "0", 5: "", 6: "x", 7: "1.50", 8: "2020-01-02 03:04:05",
		9: "b", 10: "a,c", 11: "0x0102", 12: "2.5", 13: `{"a": 1}`, 15: "-01:02:03", 16: "18446744073709551615",
	}
	for id, w := range want {
		if got := colText(t, rc.Row, id); got != w {
			t.Errorf("column %d: %q, want %q", id, got, w)
		}
	}
	if _, err := rc.Row.Column(14); err == nil || !strings.Contains(err.Error(), "origin default") {
		t.Fatalf("bad default: %v", err)
	}
	// A stored NULL is NULL, not the default.
	rc = mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(30, 1), Value: v2(t, []int64{1, 2}, i64(1), value.Datum{})}, ti)
	if got := colText(t, rc.Row, 2); got != "NULL" {
		t.Fatalf("stored NULL with default: %q", got)
	}
	// ForEach reports the bad default as an error too.
	if err := rc.Row.ForEach(func(*model.ColumnInfo, value.Datum) error { return nil }); err == nil {
		t.Fatal("ForEach hid an unusable default")
	}
}

// Rule MT13: virtual generated columns and non-public columns are not part
// of row images; stored generated columns are.
func TestVirtualAndNonPublic(t *testing.T) {
	ti := newTable(40,
		newCol(1, "a", mysql.TypeLong),
		newCol(2, "v", mysql.TypeLong, virtual("`a` + 1")),
		newCol(3, "s", mysql.TypeLong, virtual("`a` * 2"), func(c *model.ColumnInfo) { c.GeneratedStored = true }),
		newCol(4, "w", mysql.TypeLong, state(model.SchemaState(2))),
	)
	m := New(Config{})
	rc := mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(40, 1), Value: v2(t, []int64{1, 3, 4}, i64(1), i64(2), i64(9))}, ti)
	if _, err := rc.Row.Column(2); !errors.Is(err, ErrVirtualColumn) {
		t.Fatalf("virtual: %v", err)
	}
	if _, err := rc.Row.Column(4); !errors.Is(err, ErrNotPublic) {
		t.Fatalf("write-only: %v", err)
	}
	if got := colText(t, rc.Row, 3); got != "2" {
		t.Fatalf("stored generated %q", got)
	}
	var names []string
	if err := rc.Row.ForEach(func(ci *model.ColumnInfo, d value.Datum) error {
		names = append(names, ci.Name.O+"="+d.String())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != "a=1,s=2" {
		t.Fatalf("ForEach %v", names)
	}
	if rc.Row.Visible(1) || !rc.Row.Visible(2) || rc.Row.Visible(3) || rc.Row.NumColumns() != 4 {
		t.Fatal("Visible/NumColumns")
	}
	if _, err := rc.Row.ColumnAt(1); !errors.Is(err, ErrVirtualColumn) {
		t.Fatalf("ColumnAt virtual: %v", err)
	}
	if d, err := rc.Row.ColumnAt(0); err != nil || d.String() != "1" {
		t.Fatalf("ColumnAt(0) %v %v", d, err)
	}
}

// Rule MT9: partition rows decode with the logical TableInfo.
func TestPartitionIDs(t *testing.T) {
	ti := pkIntTable(50, false)
	ti.Partition = &model.PartitionInfo{Type: 1, Enable: true, Definitions: []model.PartitionDefinition{{ID: 51}, {ID: 52}}}
	m := New(Config{})
	rc := mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(52, 3), Value: v2(t, []int64{2}, str("p"))}, ti)
	if rc.TableID != 52 || colText(t, rc.Row, 2) != "p" {
		t.Fatalf("partition row %+v", rc)
	}
	var out RowChange
	if err := m.Decode(&kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(50, 3), Value: v2(t, []int64{2}, str("p"))}, ti, &out); err == nil {
		t.Fatal("logical id of a partitioned table accepted as a row key")
	}
}

// Rule MT14: decoder state is cached per table and rebuilt only when the
// TableInfo pointer changes (a new schema version).
func TestDecoderCache(t *testing.T) {
	ti := pkIntTable(60, false)
	m := New(Config{})
	e := &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(60, 1), Value: v2(t, []int64{2, 3}, str("a"), i64(1))}
	mustDecode(t, m, e, ti)
	first := m.tables[60]
	mustDecode(t, m, e, ti)
	if m.tables[60] != first {
		t.Fatal("decoder rebuilt for the same TableInfo")
	}
	// New schema version adds a column with a default.
	ti2 := pkIntTable(60, false)
	ti2.Columns = append(ti2.Columns, newCol(4, "added", mysql.TypeLong, originDefault_("5")))
	ti2.Columns[3].Offset = 3
	rc := mustDecode(t, m, e, ti2)
	if m.tables[60] == first {
		t.Fatal("decoder not rebuilt for a new TableInfo")
	}
	if got := colText(t, rc.Row, 4); got != "5" {
		t.Fatalf("added column %q", got)
	}
	m.Forget(60)
	if m.tables[60] != nil || m.last != nil {
		t.Fatal("Forget kept state")
	}
}

// Rule MT1: v1 rows decode through the mounter like v2 rows.
func TestV1Rows(t *testing.T) {
	ti := pkIntTable(70, false)
	val, err := rowcodec.EncodeV1(nil, []int64{2, 3}, []value.Datum{str("old format"), i64(-3)})
	if err != nil {
		t.Fatal(err)
	}
	m := New(Config{})
	rc := mustDecode(t, m, &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: intKey(70, 8), Value: val}, ti)
	if a, b, c := colText(t, rc.Row, 1), colText(t, rc.Row, 2), colText(t, rc.Row, 3); a != "8" || b != "old format" || c != "-3" {
		t.Fatalf("v1 row %q %q %q", a, b, c)
	}
}

// Rule MT7: which string key forms give the text back.
func TestLossyKeyCollation(t *testing.T) {
	cases := map[string]bool{
		"binary": false, "utf8mb4_bin": false, "utf8mb4_0900_bin": false, "latin1_bin": false, "ascii_bin": false,
		"utf8mb4_general_ci": true, "utf8mb4_unicode_ci": true, "utf8mb4_0900_ai_ci": true, "gbk_chinese_ci": true, "gbk_bin": true,
	}
	for coll, lossy := range cases {
		ft := types.NewFieldType(mysql.TypeVarchar)
		ft.SetCollate(coll)
		if got := lossyKeyCollation(ft); got != lossy {
			t.Errorf("%s: lossy=%v, want %v", coll, got, lossy)
		}
	}
	ft := types.NewFieldType(mysql.TypeLong)
	ft.SetCollate("utf8mb4_general_ci")
	if lossyKeyCollation(ft) {
		t.Error("non-string column reported lossy")
	}
}

// Rule MT14: steady-state decoding of clustered rows, handle columns from
// the key included, does not allocate per row (the key slab aside).
func TestCommonHandleNoAllocs(t *testing.T) {
	m := New(Config{})
	ti := commonTable(22, "utf8mb4_bin")
	key := commonKey(t, 22, "a-longer-string-key-value", 42)
	val := v2(t, []int64{3}, str("val"))
	upd := &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: key, Value: val, OldValue: val}
	del := &kvevent.RawKVEntry{OpType: kvevent.OpTypeDelete, Key: key}
	var rc RowChange
	var dst []value.Datum
	run := func() {
		if err := m.Decode(upd, ti, &rc); err != nil {
			t.Fatal(err)
		}
		var err error
		if dst, err = rc.Row.Datums(dst); err != nil || string(dst[0].GetBytes()) != "a-longer-string-key-value" {
			t.Fatalf("%v %v", dst, err)
		}
		if err := m.Decode(del, ti, &rc); err != nil {
			t.Fatal(err)
		}
		if d, err := rc.PreRow.Column(1); err != nil || string(d.GetBytes()) != "a-longer-string-key-value" {
			t.Fatalf("%v %v", d, err)
		}
	}
	run()
	if n := testing.AllocsPerRun(200, run); n > 0.1 {
		t.Fatalf("%v allocs per update+delete", n)
	}
}
