package value

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/value/golden"
)

const goldenFile = "golden/tidb-golden.jsonl"
const vectorsFile = "reference/tidb-vectors.jsonl"

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func timeType(t *testing.T, s string) byte {
	switch s {
	case "date", "DATE":
		return mysql.TypeDate
	case "datetime", "DATETIME":
		return mysql.TypeDatetime
	case "timestamp", "TIMESTAMP":
		return mysql.TypeTimestamp
	}
	t.Fatalf("unknown time type %q", s)
	return 0
}

// Golden kind "decimal": parse → round to the column scale → bin bytes and
// text; bin bytes → same text; natural shape (spec V4, V5).
func TestGoldenDecimal(t *testing.T) {
	for _, r := range golden.OfKind(t, goldenFile, "decimal") {
		var g struct {
			Input            string `json:"input"`
			Precision        int    `json:"precision"`
			Frac             int    `json:"frac"`
			Text             string `json:"text"`
			BinHex           string `json:"bin_hex"`
			BinSize          int    `json:"decimal_bin_size_bytes_len"`
			NaturalPrecision int    `json:"natural_precision"`
			NaturalFrac      int    `json:"natural_frac"`
		}
		r.Decode(t, &g)
		d, err := ParseDecimal(g.Input)
		if err != nil {
			t.Fatalf("%s: parse: %v", r.Name, err)
		}
		d, err = d.Round(g.Frac)
		if err != nil {
			t.Fatalf("%s: round: %v", r.Name, err)
		}
		if got := d.String(); got != g.Text {
			t.Errorf("%s: text %q, want %q", r.Name, got, g.Text)
		}
		if p, f := d.PrecisionAndFrac(); p != g.NaturalPrecision || f != g.NaturalFrac {
			t.Errorf("%s: natural shape (%d,%d), want (%d,%d)", r.Name, p, f, g.NaturalPrecision, g.NaturalFrac)
		}
		bin, err := d.AppendBin(nil, g.Precision, g.Frac)
		if err != nil {
			t.Fatalf("%s: bin: %v", r.Name, err)
		}
		if hex.EncodeToString(bin) != g.BinHex {
			t.Errorf("%s: bin %x, want %s", r.Name, bin, g.BinHex)
		}
		if n, _ := DecimalBinSize(g.Precision, g.Frac); n != g.BinSize {
			t.Errorf("%s: bin size %d, want %d", r.Name, n, g.BinSize)
		}
		back, n, err := DecodeDecimalBin(mustHex(t, g.BinHex), g.Precision, g.Frac)
		if err != nil || n != len(bin) {
			t.Fatalf("%s: decode: n=%d err=%v", r.Name, n, err)
		}
		if back.String() != g.Text {
			t.Errorf("%s: decoded %q, want %q", r.Name, back.String(), g.Text)
		}
		dd := NewDecimalDatumBin(bin, g.Precision, g.Frac)
		if dd.String() != g.Text {
			t.Errorf("%s: datum text %q, want %q", r.Name, dd.String(), g.Text)
		}
	}
}

// Golden kind "time": fields ↔ packed uint, CoreTime, text (spec V6, V7).
func TestGoldenTime(t *testing.T) {
	for _, r := range golden.OfKind(t, goldenFile, "time") {
		var g struct {
			Input       string `json:"input"`
			Type        string `json:"type"`
			Fsp         int    `json:"fsp"`
			Packed      string `json:"packed_uint"`
			PackedHex   string `json:"packed_uint_hex"`
			CoreTime    string `json:"core_time_uint64"`
			Text        string `json:"text"`
			Year        int    `json:"year"`
			Month       int    `json:"month"`
			Day         int    `json:"day"`
			Hour        int    `json:"hour"`
			Minute      int    `json:"minute"`
			Second      int    `json:"second"`
			Microsecond int    `json:"microsecond"`
		}
		r.Decode(t, &g)
		tp := timeType(t, g.Type)
		tm, err := ParseTime(g.Input, tp, g.Fsp)
		if err != nil {
			t.Fatalf("%s: parse: %v", r.Name, err)
		}
		want := Time{Year: uint16(g.Year), Month: uint8(g.Month), Day: uint8(g.Day), Hour: uint8(g.Hour),
			Minute: uint8(g.Minute), Second: uint8(g.Second), Microsecond: uint32(g.Microsecond), Type: tp, Fsp: uint8(g.Fsp)}
		if tm != want {
			t.Errorf("%s: parsed %+v, want %+v", r.Name, tm, want)
		}
		packed, _ := strconv.ParseUint(g.Packed, 10, 64)
		if tm.Pack() != packed {
			t.Errorf("%s: packed %d, want %d", r.Name, tm.Pack(), packed)
		}
		if UnpackTime(packed, tp, g.Fsp) != want {
			t.Errorf("%s: unpacked %+v, want %+v", r.Name, UnpackTime(packed, tp, g.Fsp), want)
		}
		core, _ := strconv.ParseUint(g.CoreTime, 10, 64)
		if tm.CoreTime() != core {
			t.Errorf("%s: core time %d, want %d", r.Name, tm.CoreTime(), core)
		}
		if TimeFromCoreTime(core, tp, g.Fsp) != want {
			t.Errorf("%s: from core %+v", r.Name, TimeFromCoreTime(core, tp, g.Fsp))
		}
		d := NewTimeDatum(packed, tp, g.Fsp)
		if d.String() != g.Text {
			t.Errorf("%s: text %q, want %q", r.Name, d.String(), g.Text)
		}
	}
}

// Golden kind "duration": parse → ns, ns → text (spec V8).
func TestGoldenDuration(t *testing.T) {
	for _, r := range golden.OfKind(t, goldenFile, "duration") {
		var g struct {
			Input string `json:"input"`
			Fsp   int    `json:"fsp"`
			Nanos string `json:"nanoseconds"`
			Text  string `json:"text"`
		}
		r.Decode(t, &g)
		d, err := ParseDuration(g.Input, g.Fsp)
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		ns, _ := strconv.ParseInt(g.Nanos, 10, 64)
		if d.Nanos != ns {
			t.Errorf("%s: ns %d, want %d", r.Name, d.Nanos, ns)
		}
		dd := NewDurationDatum(ns, g.Fsp)
		if dd.String() != g.Text {
			t.Errorf("%s: text %q, want %q", r.Name, dd.String(), g.Text)
		}
	}
}

// Golden kind "json_binary": text → bytes identical; bytes → canonical text
// (spec V9, V10).
func TestGoldenJSONBinary(t *testing.T) {
	for _, r := range golden.OfKind(t, goldenFile, "json_binary") {
		var g struct {
			Input    string `json:"input"`
			Text     string `json:"text"`
			RowHex   string `json:"row_value_hex"`
			TypeCode int    `json:"type_code"`
			ValueHex string `json:"value_hex"`
		}
		r.Decode(t, &g)
		j, err := ParseJSON([]byte(g.Input))
		if err != nil {
			t.Fatalf("%s: parse: %v", r.Name, err)
		}
		if got := hex.EncodeToString(j.AppendTyped(nil)); got != g.RowHex {
			t.Errorf("%s: encoded %s, want %s", r.Name, got, g.RowHex)
		}
		raw := mustHex(t, g.RowHex)
		dj, err := BinaryJSONFromTyped(raw)
		if err != nil {
			t.Fatalf("%s: view: %v", r.Name, err)
		}
		if int(dj.TypeCode) != g.TypeCode || hex.EncodeToString(dj.Value) != g.ValueHex {
			t.Errorf("%s: split %x/%x, want %x/%s", r.Name, dj.TypeCode, dj.Value, g.TypeCode, g.ValueHex)
		}
		txt, err := dj.AppendText(nil)
		if err != nil || string(txt) != g.Text {
			t.Errorf("%s: text %q (err %v), want %q", r.Name, txt, err, g.Text)
		}
		d := NewJSONDatum(raw)
		if d.String() != g.Text {
			t.Errorf("%s: datum text %q", r.Name, d.String())
		}
	}
}

// Vectors of tidb-vectors.jsonl that concern value types.
func TestReferenceVectors(t *testing.T) {
	n := 0
	for _, r := range golden.Lines(t, vectorsFile) {
		var g struct {
			Input json.RawMessage `json:"input"`
			Hex   string          `json:"hex"`
			Value string          `json:"value"`
		}
		r.Decode(t, &g)
		want := mustHex(t, g.Hex)
		switch r.Kind {
		case "types.MyDecimal.ToBin":
			var in struct {
				Decimal   string `json:"decimal"`
				Precision int    `json:"precision"`
				Frac      int    `json:"frac"`
			}
			json.Unmarshal(g.Input, &in)
			d := MustParseDecimal(in.Decimal)
			bin, err := d.AppendBin(nil, in.Precision, in.Frac)
			if err != nil || string(bin) != string(want) {
				t.Errorf("line %d: bin %x (err %v), want %s", r.Line, bin, err, g.Hex)
			}
			back, _, err := DecodeDecimalBin(want, in.Precision, in.Frac)
			if err != nil || back.String() != in.Decimal {
				t.Errorf("line %d: decoded %s (err %v)", r.Line, back.String(), err)
			}
			n++
		case "types.Time.ToPackedUint":
			var in struct {
				Time string `json:"time"`
				Type string `json:"type"`
				Fsp  int    `json:"fsp"`
			}
			json.Unmarshal(g.Input, &in)
			tm, err := ParseTime(in.Time, timeType(t, in.Type), in.Fsp)
			if err != nil {
				t.Fatalf("line %d: %v", r.Line, err)
			}
			if strconv.FormatUint(tm.Pack(), 10) != g.Value {
				t.Errorf("line %d: packed %d, want %s", r.Line, tm.Pack(), g.Value)
			}
			n++
		case "types.Duration.nanoseconds":
			var in struct {
				Duration string `json:"duration"`
				Fsp      int    `json:"fsp"`
			}
			json.Unmarshal(g.Input, &in)
			d, err := ParseDuration(in.Duration, in.Fsp)
			if err != nil || strconv.FormatInt(d.Nanos, 10) != g.Value {
				t.Errorf("line %d: ns %d (err %v), want %s", r.Line, d.Nanos, err, g.Value)
			}
			n++
		case "types.VectorFloat32.SerializeTo":
			var in struct {
				Vector []float32 `json:"vector"`
			}
			json.Unmarshal(g.Input, &in)
			got, err := AppendVectorFloat32(nil, in.Vector)
			if err != nil || string(got) != string(want) {
				t.Errorf("line %d: %x (err %v), want %s", r.Line, got, err, g.Hex)
			}
			v, err := VectorFloat32FromBytes(want)
			if err != nil || v.Len() != len(in.Vector) {
				t.Errorf("line %d: view len %d err %v", r.Line, v.Len(), err)
			}
			n++
		case "types.BinaryJSON":
			var in struct {
				JSON json.RawMessage `json:"json"`
			}
			json.Unmarshal(g.Input, &in)
			j, err := ParseJSON(in.JSON)
			if err != nil || string(j.AppendTyped(nil)) != string(want) {
				t.Errorf("line %d: %x (err %v), want %s", r.Line, j.AppendTyped(nil), err, g.Hex)
			}
			n++
		}
	}
	if n < 7 {
		t.Fatalf("only %d value vectors applied, expected at least 7", n)
	}
}

// Canonical text of values as the real tidb-server returned them over SQL
// (tidb-server-capture.jsonl, table t_renamed rows -1, 1 and MaxInt64).
//
// Rule V3: float text (exponent form, float32 digits) as the server showed it.
func TestCanonicalTextMatchesServerCapture(t *testing.T) {
	vec := func(fs ...float32) Datum {
		b, err := AppendVectorFloat32(nil, fs)
		if err != nil {
			t.Fatal(err)
		}
		return NewVectorFloat32Datum(b)
	}
	dur := func(s string, fsp int) Datum {
		d, err := ParseDuration(s, fsp)
		if err != nil {
			t.Fatal(err)
		}
		return NewDurationDatum(d.Nanos, fsp)
	}
	tim := func(s string, tp byte, fsp int) Datum {
		tm, err := ParseTime(s, tp, fsp)
		if err != nil {
			t.Fatal(err)
		}
		return NewTimeDatum(tm.Pack(), tp, fsp)
	}
	cases := []struct {
		d    Datum
		want string
	}{
		{NewFloat64Datum(-1e300), "-1e300"},
		{NewFloat64Datum(math.MaxFloat64), "1.7976931348623157e308"},
		{NewFloat64Datum(3.141592653589793), "3.141592653589793"},
		{NewFloat32Datum(-1.25), "-1.25"},
		{NewFloat32Datum(1.5), "1.5"},
		{NewFloat32Datum(math.MaxFloat32), "3.40282e38"},
		{NewBitDatum(0, 2), "0x0000"},
		{NewBitDatum(0x2aa, 2), "0x02aa"},
		{NewBitDatum(0x3ff, 2), "0x03ff"},
		{NewBytesDatum(nil), "0x"},
		{NewBytesDatum([]byte{0xde, 0xad, 0xbe, 0xef}), "0xdeadbeef"},
		{NewYearDatum(1901), "1901"},
		{NewYearDatum(0), "0000"},
		{dur("-838:59:59", 2), "-838:59:59.00"},
		{dur("12:34:56.78", 2), "12:34:56.78"},
		{tim("1970-01-01 00:00:01", mysql.TypeTimestamp, 3), "1970-01-01 00:00:01.000"},
		{tim("1000-01-01 00:00:00", mysql.TypeDatetime, 6), "1000-01-01 00:00:00.000000"},
		{tim("9999-12-31", mysql.TypeDate, 0), "9999-12-31"},
		{vec(-1.5, 0, 0.001), "[-1.5,0,0.001]"},
		{vec(1, 2, 3), "[1,2,3]"},
		{vec(1e38, -1e38, 0), "[100000000000000000000000000000000000000,-100000000000000000000000000000000000000,0]"},
		{NewEnumDatum(1, "a"), "a"},
		{NewSetDatum(5, "x,z"), "x,z"},
		{NewUintDatum(18446744073709551615), "18446744073709551615"},
		{NewIntDatum(-2147483648), "-2147483648"},
		{NewStringDatum("你好, мир! 🎉 ñ"), "你好, мир! 🎉 ñ"},
		{NewNullDatum(), "NULL"},
	}
	for i, c := range cases {
		if got := c.d.String(); got != c.want {
			t.Errorf("case %d (%s): %q, want %q", i, c.d.Kind(), got, c.want)
		}
	}
	// SQL text of a JSON column on the server.
	j, err := ParseJSON([]byte(`{"a": [1, 2.5, "x", null, true, false], "b": {"c": "中文"}, "d": -9223372036854775808, "e": 18446744073709551615}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := j.String(); got != `{"a": [1, 2.5, "x", null, true, false], "b": {"c": "中文"}, "d": -9223372036854775808, "e": 18446744073709551615}` {
		t.Errorf("json text %s", got)
	}
}
