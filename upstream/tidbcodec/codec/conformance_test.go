package codec

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value/golden"
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// Every codec vector of tidb-vectors.jsonl (rules K2, K3, K5, K7, K8).
//
// Rule K1: every datum's flag byte equals TiDB's.
func TestReferenceVectors(t *testing.T) {
	n := 0
	for _, r := range golden.Lines(t, "reference/tidb-vectors.jsonl") {
		var g struct {
			Input json.RawMessage `json:"input"`
			Hex   string          `json:"hex"`
		}
		r.Decode(t, &g)
		want := mustHex(t, g.Hex)
		var in struct {
			BytesHex  string  `json:"bytes_hex"`
			Float64   float64 `json:"float64"`
			Int64     int64   `json:"int64"`
			Decimal   string  `json:"decimal"`
			Precision int     `json:"precision"`
			Frac      int     `json:"frac"`
		}
		json.Unmarshal(g.Input, &in)
		var got []byte
		switch r.Kind {
		case "codec.EncodeBytes", "codec.EncodeBytesDesc":
			raw := mustHex(t, in.BytesHex)
			desc := r.Kind == "codec.EncodeBytesDesc"
			var rest, back []byte
			var err error
			if desc {
				got = EncodeBytesDesc(nil, raw)
				rest, back, err = DecodeBytesDesc(want, nil)
			} else {
				got = EncodeBytes(nil, raw)
				rest, back, err = DecodeBytes(want, nil)
			}
			if err != nil || len(rest) != 0 || !bytes.Equal(back, raw) {
				t.Errorf("line %d: decode %x rest %x err %v, want %x", r.Line, back, rest, err, raw)
			}
		case "codec.EncodeFloat":
			got = EncodeFloat(nil, in.Float64)
			if _, f, err := DecodeFloat(want); err != nil || f != in.Float64 {
				t.Errorf("line %d: decoded %v err %v", r.Line, f, err)
			}
		case "codec.EncodeKey(int64)":
			got, _ = EncodeKey(nil, value.NewIntDatum(in.Int64))
		case "codec.EncodeValue(int64)":
			got, _ = EncodeValue(nil, value.NewIntDatum(in.Int64))
		case "codec.EncodeDecimal":
			var err error
			got, err = EncodeDecimal(nil, value.MustParseDecimal(in.Decimal), in.Precision, in.Frac)
			if err != nil {
				t.Fatal(err)
			}
		default:
			continue
		}
		n++
		if !bytes.Equal(got, want) {
			t.Errorf("line %d %s: got %x, want %s", r.Line, r.Kind, got, g.Hex)
		}
		if r.Kind == "codec.EncodeKey(int64)" || r.Kind == "codec.EncodeValue(int64)" {
			rest, d, err := DecodeOne(want)
			if err != nil || len(rest) != 0 || d.GetInt64() != in.Int64 {
				t.Errorf("line %d: DecodeOne %v rest %x err %v", r.Line, d, rest, err)
			}
		}
	}
	if n < 21 {
		t.Fatalf("only %d codec vectors applied, want at least 21", n)
	}
}

// Golden "decimal" (key form with natural shape, value form with the
// column shape) and "time" (value/key form of packed time) records.
func TestGoldenDatumForms(t *testing.T) {
	for _, r := range golden.OfKind(t, "golden/tidb-golden.jsonl", "decimal") {
		var g struct {
			Input, Text string
			Precision   int
			Frac        int
			CodecHex    string `json:"codec_encode_decimal_hex"`
			KeyHex      string `json:"memcomparable_key_hex"`
			NaturalFrac int    `json:"natural_frac"`
			NaturalPrec int    `json:"natural_precision"`
		}
		r.Decode(t, &g)
		dec, _ := value.MustParseDecimal(g.Input).Round(g.Frac)
		got, err := EncodeDecimal(nil, dec, g.Precision, g.Frac)
		if err != nil || hex.EncodeToString(got) != g.CodecHex {
			t.Errorf("%s: value form %x err %v, want %s", r.Name, got, err, g.CodecHex)
		}
		// A datum without a declared shape uses the natural one in keys.
		d, err := value.NewDecimalDatum(dec, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		key, err := EncodeKey(nil, d)
		if err != nil || hex.EncodeToString(key) != g.KeyHex {
			t.Errorf("%s: key form %x err %v, want %s", r.Name, key, err, g.KeyHex)
		}
		rest, back, err := DecodeOne(mustHex(t, g.KeyHex))
		if err != nil || len(rest) != 0 || back.Kind() != value.KindDecimal {
			t.Fatalf("%s: DecodeOne: %v %v", r.Name, back, err)
		}
		bd, _ := back.GetDecimal()
		if !bd.Equal(&dec) {
			t.Errorf("%s: decoded %s, want %s", r.Name, bd.String(), dec.String())
		}
		if p, f := back.DecimalShape(); p != g.NaturalPrec || f != g.NaturalFrac {
			t.Errorf("%s: key shape (%d,%d)", r.Name, p, f)
		}
	}
	for _, r := range golden.OfKind(t, "golden/tidb-golden.jsonl", "time") {
		var g struct {
			Input, Type string
			Fsp         int
			ValueHex    string `json:"codec_value_hex"`
			KeyHex      string `json:"memcomparable_key_hex"`
			Text        string
		}
		r.Decode(t, &g)
		tp := map[string]byte{"date": 10, "datetime": 12, "timestamp": 7}[g.Type]
		tm, err := value.ParseTime(g.Input, tp, g.Fsp)
		if err != nil {
			t.Fatal(err)
		}
		d := value.NewTimeDatum(tm.Pack(), tp, g.Fsp)
		k, _ := EncodeKey(nil, d)
		v, _ := EncodeValue(nil, d)
		if hex.EncodeToString(k) != g.KeyHex || hex.EncodeToString(v) != g.ValueHex {
			t.Errorf("%s: key %x value %x, want %s / %s", r.Name, k, v, g.KeyHex, g.ValueHex)
		}
	}
}

// Hand-written datum encodings pinned by the facts sheet.
func TestDatumFormsTable(t *testing.T) {
	j, _ := value.ParseJSON([]byte(`{"key":"value"}`))
	vec, _ := value.AppendVectorFloat32(nil, []float32{1.1, 2.2})
	cases := []struct {
		d        value.Datum
		key, val string
	}{
		{value.NewNullDatum(), "00", "00"},
		{value.NewIntDatum(0), "038000000000000000", "0800"},
		{value.NewIntDatum(-1), "037fffffffffffffff", "0801"},
		{value.NewUintDatum(300), "04000000000000012c", "09ac02"},
		{value.NewFloat64Datum(1.8), "05bffccccccccccccd", "05bffccccccccccccd"},
		{value.NewStringDatum("abc"), "016162630000000000fa", "0206616263"},
		{value.NewDurationDatum(14400000000000, 0), "0780000d18c2e28000", "0780000d18c2e28000"},
		{value.NewEnumDatum(2, "b"), "040000000000000002", "0902"},
		{value.NewJSONDatum(j.AppendTyped(nil)), "0a01010000001c0000001300000003000c160000006b65790576616c7565", "0a01010000001c0000001300000003000c160000006b65790576616c7565"},
		{value.NewVectorFloat32Datum(vec), "1402000000cdcc8c3fcdcc0c40", "1402000000cdcc8c3fcdcc0c40"},
		{value.NewMaxValueDatum(), "fa", "fa"},
	}
	for i, c := range cases {
		k, err := EncodeKey(nil, c.d)
		if err != nil || hex.EncodeToString(k) != c.key {
			t.Errorf("case %d key %x err %v, want %s", i, k, err, c.key)
		}
		v, err := EncodeValue(nil, c.d)
		if err != nil || hex.EncodeToString(v) != c.val {
			t.Errorf("case %d value %x err %v, want %s", i, v, err, c.val)
		}
		for _, enc := range [][]byte{k, v} {
			n, err := PeekLength(enc)
			if err != nil || n != len(enc) {
				t.Errorf("case %d: peek %d err %v, want %d", i, n, err, len(enc))
			}
		}
	}
}

// Errors carry offsets and say what was wrong.
//
// Rules K1 (an unknown flag fails at offset 0), K6 (compact bytes longer than
// the input).
func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		in     string
		offset int
	}{
		{"", 0},
		{"03800000", 1},
		{"ff", 0},
		{"010102030000000700fc", 6},     // pad bytes not zero
		{"010102030000000000ee", 9},     // marker means 17 pad bytes
		{"0207616263", 2},               // compact bytes longer than input
		{"0641008000", 1},               // decimal precision 65+ frac > 30
		{"0a0e0102", 1},                 // json date truncated
		{"1403000000cdcc8c3f", 1},       // vector truncated
		{"08ffffffffffffffffffff01", 1}, // varint overflow
	}
	for _, c := range cases {
		_, _, err := DecodeOne(mustHex(t, c.in))
		if err == nil {
			t.Errorf("%s: no error", c.in)
			continue
		}
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("%s: error %v is not *codec.Error", c.in, err)
			continue
		}
		if ce.Offset < c.offset {
			t.Errorf("%s: offset %d, want >= %d (%v)", c.in, ce.Offset, c.offset, err)
		}
	}
}

// Rule K11.
func TestSortKey(t *testing.T) {
	for _, c := range []struct{ coll, in, out string }{
		{"utf8mb4_bin", "abc  ", "abc"}, {"binary", "abc ", "abc "}, {"utf8mb4_0900_bin", "a ", "a "},
	} {
		got, err := SortKey(c.coll, []byte(c.in))
		if err != nil || string(got) != c.out {
			t.Errorf("%s %q: %q %v", c.coll, c.in, got, err)
		}
	}
	if _, err := SortKey("utf8mb4_general_ci", []byte("a")); err == nil {
		t.Error("general_ci must be refused")
	}
}
