package tablecodec

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value/golden"
)

const goldenFile = "golden/tidb-golden.jsonl"
const captureFile = "golden/tidb-server-capture.jsonl"

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// Golden "record_key": encode → key bytes and comparable bytes; decode →
// table id and handle (rules K13, K14, K18).
//
// Rule K12: layout and the quick IsRecordKey/IsIndexKey tests on golden keys.
func TestGoldenRecordKeys(t *testing.T) {
	for _, r := range golden.OfKind(t, goldenFile, "record_key") {
		var g struct {
			TableID       int64  `json:"table_id"`
			Handle        string `json:"handle"`
			HandleKind    string `json:"handle_kind"`
			HandleEncoded string `json:"handle_encoded_hex"`
			KeyHex        string `json:"key_hex"`
			CmpHex        string `json:"comparable_key_hex"`
			Datums        []struct {
				BytesHex  string `json:"bytes_hex"`
				Collation string `json:"collation"`
				Kind      string `json:"datum_kind"`
				Text      string `json:"text"`
			} `json:"handle_datums"`
		}
		r.Decode(t, &g)
		key := mustHex(t, g.KeyHex)
		var h Handle
		if g.HandleKind == "int" {
			v, _ := strconv.ParseInt(g.Handle, 10, 64)
			h = NewIntHandle(v)
		} else {
			var ds []value.Datum
			for _, d := range g.Datums {
				switch d.Kind {
				case "string":
					sk, err := codec.SortKey(d.Collation, mustHex(t, d.BytesHex))
					if err != nil {
						t.Fatal(err)
					}
					ds = append(ds, value.NewBytesDatum(sk))
				case "int64":
					v, _ := strconv.ParseInt(d.Text, 10, 64)
					ds = append(ds, value.NewIntDatum(v))
				default:
					t.Fatalf("%s: unhandled datum kind %s", r.Name, d.Kind)
				}
			}
			var err error
			h, err = CommonHandleFromDatums(ds...)
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := EncodeRecordKey(nil, g.TableID, h); !bytes.Equal(got, key) {
			t.Errorf("%s: key %x, want %s", r.Name, got, g.KeyHex)
		}
		if got := hex.EncodeToString(h.Encoded()); got != g.HandleEncoded {
			t.Errorf("%s: handle bytes %s, want %s", r.Name, got, g.HandleEncoded)
		}
		if got := hex.EncodeToString(ComparableKey(key)); got != g.CmpHex {
			t.Errorf("%s: comparable %s, want %s", r.Name, got, g.CmpHex)
		}
		raw, err := DecodeComparableKey(mustHex(t, g.CmpHex), nil)
		if err != nil || !bytes.Equal(raw, key) {
			t.Errorf("%s: comparable decode %x err %v", r.Name, raw, err)
		}
		tid, dh, err := DecodeRecordKey(key)
		if err != nil || tid != g.TableID || !dh.Equal(h) {
			t.Errorf("%s: decoded table %d handle %v err %v", r.Name, tid, dh, err)
		}
		if g.HandleKind == "common" {
			ds, err := dh.Datums()
			if err != nil || len(ds) != len(g.Datums) {
				t.Fatalf("%s: datums %v err %v", r.Name, ds, err)
			}
			// The int column round-trips exactly; strings round-trip as
			// their sort key.
			if last := ds[len(ds)-1]; last.String() != g.Datums[len(g.Datums)-1].Text {
				t.Errorf("%s: int column %s", r.Name, last.String())
			}
		} else if dh.IntValue() != h.IntValue() || !dh.IsInt() {
			t.Errorf("%s: int handle %d", r.Name, dh.IntValue())
		}
		if DecodeTableID(key) != g.TableID || !IsRecordKey(key) || IsIndexKey(key) {
			t.Errorf("%s: quick tests disagree", r.Name)
		}
	}
}

// Golden "table_span": prefixes and their PrefixNext, raw and comparable.
func TestGoldenTableSpans(t *testing.T) {
	for _, r := range golden.OfKind(t, goldenFile, "table_span") {
		var g map[string]any
		r.Decode(t, &g)
		id := int64(g["table_id"].(float64))
		hx := func(k string) string { return g[k].(string) }
		tp := EncodeTablePrefix(nil, id)
		rp := EncodeRecordPrefix(nil, id)
		checks := map[string][]byte{
			"table_prefix_hex":                  tp,
			"encode_table_prefix_hex":           tp,
			"table_prefix_next_hex":             PrefixNext(tp),
			"record_prefix_hex":                 rp,
			"record_prefix_next_hex":            PrefixNext(rp),
			"index_prefix_hex":                  append(EncodeTablePrefix(nil, id), '_', 'i'),
			"handle_range_start_hex":            EncodeIntRecordKey(nil, id, -1<<63),
			"handle_range_end_hex":              EncodeIntRecordKey(nil, id, 1<<63-1),
			"table_prefix_comparable_hex":       ComparableKey(tp),
			"table_prefix_next_comparable_hex":  ComparableKey(PrefixNext(tp)),
			"record_prefix_comparable_hex":      ComparableKey(rp),
			"record_prefix_next_comparable_hex": ComparableKey(PrefixNext(rp)),
			"handle_range_start_comparable_hex": ComparableKey(EncodeIntRecordKey(nil, id, -1<<63)),
			"handle_range_end_comparable_hex":   ComparableKey(EncodeIntRecordKey(nil, id, 1<<63-1)),
		}
		for k, got := range checks {
			if hex.EncodeToString(got) != hx(k) {
				t.Errorf("%s %s: %x, want %s", r.Name, k, got, hx(k))
			}
		}
		span := TableRecordSpan(0, false, id)
		if hex.EncodeToString(span.StartKey) != hx("record_prefix_comparable_hex") ||
			hex.EncodeToString(span.EndKey) != hx("record_prefix_next_comparable_hex") {
			t.Errorf("%s: span %x..%x", r.Name, span.StartKey, span.EndKey)
		}
	}
}

// Golden "meta_key": string, hash data, hash meta and hash prefix keys
// (rules K19-K22).
func TestGoldenMetaKeys(t *testing.T) {
	for _, r := range golden.OfKind(t, goldenFile, "meta_key") {
		var g struct {
			KeyHex string `json:"key_hex"`
			CmpHex string `json:"comparable_key_hex"`
		}
		r.Decode(t, &g)
		parts := strings.Split(r.Name, "/")
		var got []byte
		switch parts[0] {
		case "hash_data":
			got = EncodeHashDataKey(nil, parts[1], []byte(parts[2]))
		case "hash_meta":
			got = EncodeHashMetaKey(nil, parts[1])
		case "string":
			got = EncodeStringDataKey(nil, parts[1])
		case "hash_data_prefix":
			got = EncodeHashDataPrefix(nil, parts[1])
		default:
			t.Fatalf("unknown meta key record %s", r.Name)
		}
		if hex.EncodeToString(got) != g.KeyHex {
			t.Errorf("%s: %x, want %s", r.Name, got, g.KeyHex)
		}
		if hex.EncodeToString(ComparableKey(got)) != g.CmpHex {
			t.Errorf("%s: comparable %x", r.Name, ComparableKey(got))
		}
		if parts[0] == "hash_data_prefix" {
			continue
		}
		mk, err := DecodeMetaKey(got)
		if err != nil || string(mk.Name) != parts[1] {
			t.Errorf("%s: decoded %+v err %v", r.Name, mk, err)
		}
		if parts[0] == "hash_data" && string(mk.Field) != parts[2] {
			t.Errorf("%s: field %q", r.Name, mk.Field)
		}
	}
	// Named helpers agree with the generic ones.
	if !bytes.Equal(EncodeDBKey(nil, 2), EncodeHashDataKey(nil, "DBs", []byte("DB:2"))) ||
		!bytes.Equal(EncodeTableKey(nil, 2, 100), EncodeHashDataKey(nil, "DB:2", []byte("Table:100"))) {
		t.Error("named meta helpers disagree")
	}
	if id, err := ParseTableField([]byte("Table:100")); err != nil || id != 100 {
		t.Errorf("ParseTableField: %d %v", id, err)
	}
	if id, err := ParseDBName([]byte("DB:2")); err != nil || id != 2 {
		t.Errorf("ParseDBName: %d %v", id, err)
	}
}

// Meta and table keys of tidb-vectors.jsonl.
func TestReferenceVectors(t *testing.T) {
	n := 0
	for _, r := range golden.Lines(t, "reference/tidb-vectors.jsonl") {
		var g struct {
			Input json.RawMessage `json:"input"`
			Hex   string          `json:"hex"`
		}
		r.Decode(t, &g)
		var in struct {
			Key       string `json:"key"`
			Field     string `json:"field"`
			TableID   int64  `json:"table_id"`
			IndexID   int64  `json:"index_id"`
			IntHandle int64  `json:"int_handle"`
			TiDBKey   string `json:"tidb_key"`
		}
		json.Unmarshal(g.Input, &in)
		var got []byte
		switch r.Kind {
		case "meta.HashDataKey":
			got = EncodeHashDataKey(nil, in.Key, []byte(in.Field))
		case "meta.StringDataKey":
			got = EncodeStringDataKey(nil, in.Key)
		case "tablecodec.EncodeTableIndexPrefix":
			got = EncodeIndexPrefix(nil, in.TableID, in.IndexID)
		case "tablecodec.EncodeRowKeyWithHandle":
			got = EncodeIntRecordKey(nil, in.TableID, in.IntHandle)
		case "tikv.region_key(EncodeBytes(key))":
			switch in.TiDBKey {
			case "t{45}_r{3744001}":
				got = ComparableKey(EncodeIntRecordKey(nil, 45, 3744001))
			case "t{123}_r (table record prefix)":
				got = ComparableKey(EncodeRecordPrefix(nil, 123))
			case "t{124} (next table prefix, end of table 123)":
				got = ComparableKey(PrefixNext(EncodeTablePrefix(nil, 123)))
			default:
				t.Fatalf("line %d: unknown region key vector %q", r.Line, in.TiDBKey)
			}
		case "tablecodec.index_value_layout":
			// Decoder-side examples: an old-layout unique value (handle 1 +
			// untouched flag) and a committed clustered-v1 value.
			iv, err := DecodeIndexValue(mustHex(t, g.Hex))
			if err != nil {
				t.Errorf("line %d: %v", r.Line, err)
			} else if strings.Contains(string(g.Input), "untouched flag") && (!iv.HasIntHandle || iv.IntHandle != 1 || !iv.Untouched) {
				t.Errorf("line %d: %+v", r.Line, iv)
			} else if strings.Contains(string(g.Input), "clustered-index v1") && !iv.Clustered {
				t.Errorf("line %d: %+v", r.Line, iv)
			}
			n++
			continue
		default:
			continue
		}
		n++
		if hex.EncodeToString(got) != g.Hex {
			t.Errorf("line %d %s: %x, want %s", r.Line, r.Kind, got, g.Hex)
		}
	}
	if n != 10 {
		t.Fatalf("applied %d key vectors, want 10", n)
	}
}

// Keys read back from a real tidb-server: row keys (int and common handle),
// index keys and the schema version meta key.
func TestServerCaptureKeys(t *testing.T) {
	for _, r := range golden.OfKind(t, captureFile, "server_row") {
		var g struct {
			KeyHex  string             `json:"key_hex"`
			CmpHex  string             `json:"comparable_key_hex"`
			TableID int64              `json:"table_id"`
			Values  map[string]*string `json:"sql_values_text"`
		}
		r.Decode(t, &g)
		key := mustHex(t, g.KeyHex)
		tid, h, err := DecodeRecordKey(key)
		if err != nil || tid != g.TableID {
			t.Fatalf("%s: table %d err %v", r.Name, tid, err)
		}
		if g.CmpHex != "" && hex.EncodeToString(ComparableKey(key)) != g.CmpHex {
			t.Errorf("%s: comparable mismatch", r.Name)
		}
		if h.IsInt() {
			if want := *g.Values["id"]; strconv.FormatInt(h.IntValue(), 10) != want {
				t.Errorf("%s: handle %d, want id %s", r.Name, h.IntValue(), want)
			}
			continue
		}
		// Clustered (k varchar utf8mb4_bin, n int) primary key.
		ds, err := h.Datums()
		if err != nil || len(ds) != 2 {
			t.Fatalf("%s: %v %v", r.Name, ds, err)
		}
		if string(ds[0].GetBytes()) != *g.Values["k"] || ds[1].String() != *g.Values["n"] {
			t.Errorf("%s: handle %s, want k=%s n=%s", r.Name, h, *g.Values["k"], *g.Values["n"])
		}
		re, _ := CommonHandleFromDatums(value.NewBytesDatum([]byte(*g.Values["k"])), ds[1])
		if !bytes.Equal(EncodeRecordKey(nil, tid, re), key) {
			t.Errorf("%s: re-encoded key differs", r.Name)
		}
	}
	for _, r := range golden.OfKind(t, captureFile, "server_index_kv") {
		var g struct {
			KeyHex   string `json:"key_hex"`
			Handle   int64  `json:"handle"`
			Index    string `json:"index"`
			CVarchar string `json:"c_varchar"`
			CInt     int64  `json:"c_int"`
		}
		r.Decode(t, &g)
		key := mustHex(t, g.KeyHex)
		tid, iid, rest, err := DecodeIndexKey(key)
		if err != nil || tid != 116 {
			t.Fatalf("%s: %d %d %v", r.Name, tid, iid, err)
		}
		vals, err := codec.Decode(rest, 0)
		if err != nil {
			t.Fatal(err)
		}
		var rebuilt []byte
		if g.Index == "uk_varchar" {
			if len(vals) != 1 || string(vals[0].GetBytes()) != g.CVarchar {
				t.Errorf("%s: values %v", r.Name, vals)
			}
			rebuilt, _ = EncodeIndexKey(nil, tid, iid, true, []value.Datum{value.NewStringDatum(g.CVarchar)}, NewIntHandle(g.Handle))
		} else {
			if len(vals) != 2 || vals[0].GetInt64() != g.CInt || vals[1].GetInt64() != g.Handle {
				t.Errorf("%s: values %v", r.Name, vals)
			}
			rebuilt, _ = EncodeIndexKey(nil, tid, iid, false, []value.Datum{value.NewIntDatum(g.CInt)}, NewIntHandle(g.Handle))
		}
		if !bytes.Equal(rebuilt, key) {
			t.Errorf("%s: rebuilt %x, want %x", r.Name, rebuilt, key)
		}
	}
	for _, r := range golden.OfKind(t, captureFile, "server_meta_kv") {
		var g struct {
			KeyHex string `json:"key_hex"`
		}
		r.Decode(t, &g)
		if got := EncodeStringDataKey(nil, r.Name); hex.EncodeToString(got) != g.KeyHex {
			t.Errorf("%s: %x, want %s", r.Name, got, g.KeyHex)
		}
	}
}

// Rule K16.
func TestKeyspace(t *testing.T) {
	// Facts §3.5: keyspace 271828 = 0x0425D4.
	p := AppendKeyspacePrefix(nil, 271828)
	if hex.EncodeToString(p) != "780425d4" {
		t.Fatalf("prefix %x", p)
	}
	key := EncodeIntRecordKey(append([]byte(nil), p...), 7, 9)
	ks, rest, ok := RemoveKeyspacePrefix(key)
	if !ok || ks != 271828 || DecodeTableID(key) != 7 {
		t.Fatalf("strip: %d %v", ks, ok)
	}
	if _, h, err := DecodeRecordKey(rest); err != nil || h.IntValue() != 9 {
		t.Fatalf("decode after strip: %v", err)
	}
	if _, _, err := DecodeRecordKey(key); err == nil || !strings.Contains(err.Error(), "keyspace") {
		t.Fatalf("keyspace key must be refused with a clear error, got %v", err)
	}
	span := TableRecordSpan(271828, true, 7)
	start, end := RawTableRecordRange(271828, true, 7)
	if !bytes.Equal(span.StartKey, ComparableKey(start)) || !bytes.Equal(span.EndKey, ComparableKey(end)) {
		t.Fatal("span is not the comparable form of the raw range")
	}
	if !bytes.HasPrefix(start, p) || string(end[len(end)-2:]) != "_s" {
		t.Fatalf("raw range %x..%x", start, end)
	}
	if ValidateKeyspaceID(1<<24) == nil || ValidateKeyspaceID(1<<24-1) != nil {
		t.Fatal("keyspace id validation")
	}
	// Span contains its table's records and no neighbour's.
	in := ComparableKey(EncodeIntRecordKey(AppendKeyspacePrefix(nil, 271828), 7, 1<<63-1))
	out := ComparableKey(EncodeIntRecordKey(AppendKeyspacePrefix(nil, 271828), 8, -1<<63))
	if bytes.Compare(in, span.StartKey) < 0 || bytes.Compare(in, span.EndKey) >= 0 || bytes.Compare(out, span.EndKey) < 0 {
		t.Fatal("span bounds")
	}
}

func TestRecordKeyErrors(t *testing.T) {
	good := EncodeIntRecordKey(nil, 5, 1)
	idx := EncodeIndexPrefix(nil, 5, 1)
	cases := []struct {
		key  []byte
		want string
	}{
		{nil, "empty"},
		{[]byte("mDBs"), "meta key"},
		{good[:10], "shorter"},
		{good[:15], "neither an 8-byte int handle"},
		{idx, "index key"},
		{append(append([]byte(nil), good[:11]...), 0x01, 0x02), "neither"},
		{append(append([]byte(nil), good[:11]...), 0x03, 1, 2, 3, 4, 5, 6, 7, 8, 9), "common handle"},
		{append(append([]byte(nil), good[:11]...), 0xee, 1, 2, 3, 4, 5, 6, 7, 8), "unknown flag"},
		{append(append([]byte(nil), good[:11]...), 0x03, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1), "zero padding"},
		{[]byte("zzzzzzzzzzzzzzzzzzzz"), "not the table prefix"},
	}
	for i, c := range cases {
		_, _, err := DecodeRecordKey(c.key)
		var ke *KeyError
		if err == nil || !errors.As(err, &ke) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("case %d %x: %v, want error containing %q", i, c.key, err, c.want)
		}
	}
}

func TestPrefixNext(t *testing.T) {
	for _, c := range [][2]string{{"00", "01"}, {"01ff", "0200"}, {"ffff", "ffff00"}, {"", "00"}} {
		if got := hex.EncodeToString(PrefixNext(mustHex(t, c[0]))); got != c[1] {
			t.Errorf("PrefixNext(%s) = %s, want %s", c[0], got, c[1])
		}
	}
}
