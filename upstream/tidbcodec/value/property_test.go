package value

import (
	"bytes"
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/internal/seedtest"
)

// newRand returns the property tests' seeded source (seedtest: -seed,
// $TIDBCODEC_SEED, or the clock; logged on failure).
func newRand(t *testing.T) *rand.Rand { return seedtest.Rand(t) }

func randDigits(r *rand.Rand, n int) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		sb.WriteByte(byte('0' + r.Intn(10)))
	}
	return sb.String()
}

func randDecimal(r *rand.Rand) (Decimal, int, int) {
	prec := 1 + r.Intn(MaxDecimalPrecision)
	frac := r.Intn(min(prec, MaxDecimalFrac) + 1)
	s := randDigits(r, r.Intn(prec-frac+1))
	if f := r.Intn(frac + 1); f > 0 {
		s += "." + randDigits(r, f)
	}
	if s == "" {
		s = "0"
	}
	if r.Intn(2) == 0 {
		s = "-" + s
	}
	return MustParseDecimal(s), prec, frac
}

// Decimal: bin round-trips at any shape that holds the value, and bin
// bytes order like the numbers (rules V4, V5).
func TestPropertyDecimal(t *testing.T) {
	r := newRand(t)
	for i := 0; i < 3000; i++ {
		d, prec, frac := randDecimal(r)
		bin, err := d.AppendBin(nil, prec, frac)
		if err != nil {
			t.Fatalf("%s at (%d,%d): %v", d.String(), prec, frac, err)
		}
		back, n, err := DecodeDecimalBin(bin, prec, frac)
		if err != nil || n != len(bin) || !back.Equal(&d) {
			t.Fatalf("%s at (%d,%d): back %s n %d err %v", d.String(), prec, frac, back.String(), n, err)
		}
		want, _ := d.Round(frac)
		if back.String() != want.String() {
			t.Fatalf("%s: text %s, want %s", d.String(), back.String(), want.String())
		}
		// Order: compare with another value at the same shape.
		e, _, _ := randDecimal(r)
		eb, err := e.AppendBin(nil, prec, frac)
		if err != nil {
			continue
		}
		if c := bytes.Compare(bin, eb); c != d.Compare(&e) {
			t.Fatalf("order of %s vs %s at (%d,%d): bytes %d, numbers %d", d.String(), e.String(), prec, frac, c, d.Compare(&e))
		}
	}
}

func TestDecimalRejects(t *testing.T) {
	d := MustParseDecimal("123.45")
	if _, err := d.AppendBin(nil, 4, 2); err == nil {
		t.Error("3 integer digits must not fit DECIMAL(4,2)")
	}
	if _, err := d.AppendBin(nil, 10, 1); err == nil {
		t.Error("non-zero fraction digit must not be truncated silently")
	}
	if _, err := MustParseDecimal("1.50").AppendBin(nil, 5, 1); err != nil {
		t.Errorf("trailing zero fraction digits may be dropped: %v", err)
	}
	for _, s := range []string{"", "-", "1.2.3", "1e5", "abc", "."} {
		if _, err := ParseDecimal(s); err == nil {
			t.Errorf("ParseDecimal(%q) accepted", s)
		}
	}
	if got, _ := MustParseDecimal("9.995").Round(2); got.String() != "10.00" {
		t.Errorf("round carry: %s", got.String())
	}
	if got, _ := MustParseDecimal("-0.004").Round(2); got.String() != "0.00" {
		t.Errorf("round to zero keeps no sign: %s", got.String())
	}
	// A bin group holding more digits than its width is corrupt.
	if _, _, err := DecodeDecimalBin([]byte{0x80, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff}, 18, 0); err == nil {
		t.Error("word 0xffffffff > 999999999 must be refused")
	}
	if _, _, err := DecodeDecimalBin([]byte{0x80}, 10, 0); err == nil {
		t.Error("truncated bin must be refused")
	}
}

func randTime(r *rand.Rand) Time {
	tps := []byte{mysql.TypeDate, mysql.TypeDatetime, mysql.TypeTimestamp}
	tp := tps[r.Intn(3)]
	fsp := r.Intn(7)
	if tp == mysql.TypeDate {
		fsp = 0
	}
	t := Time{Year: uint16(r.Intn(10000)), Month: uint8(1 + r.Intn(12)), Day: uint8(1 + r.Intn(28)), Type: tp, Fsp: uint8(fsp)}
	if tp != mysql.TypeDate {
		t.Hour, t.Minute, t.Second = uint8(r.Intn(24)), uint8(r.Intn(60)), uint8(r.Intn(60))
		unit := uint32(pow10[6-fsp])
		t.Microsecond = uint32(r.Intn(1000000)) / unit * unit
	}
	return t
}

// Time: pack/unpack, core time and text round-trip; packed order is
// chronological order (rules V6, V7).
func TestPropertyTime(t *testing.T) {
	r := newRand(t)
	for i := 0; i < 5000; i++ {
		a := randTime(r)
		if got := UnpackTime(a.Pack(), a.Type, int(a.Fsp)); got != a {
			t.Fatalf("unpack %+v → %+v", a, got)
		}
		if got := TimeFromCoreTime(a.CoreTime(), a.Type, int(a.Fsp)); got != a {
			t.Fatalf("core %+v → %+v", a, got)
		}
		p, err := ParseTime(a.String(), a.Type, int(a.Fsp))
		if err != nil || p != a {
			t.Fatalf("parse %q → %+v %v, want %+v", a.String(), p, err, a)
		}
		b := randTime(r)
		ga, _ := a.GoTime(time.UTC)
		gb, _ := b.GoTime(time.UTC)
		if a.Type == b.Type && (a.Pack() < b.Pack()) != ga.Before(gb) {
			t.Fatalf("order %s vs %s", a, b)
		}
	}
	if _, err := ParseTime("2024-13-01", mysql.TypeDate, 0); err == nil {
		t.Error("month 13 accepted")
	}
	if tm, err := ParseTime("2024-12-31 23:59:59.9999996", mysql.TypeDatetime, 6); err != nil || tm.String() != "2025-01-01 00:00:00.000000" {
		t.Errorf("rounding carry: %v %v", tm, err)
	}
	if err := UnpackTime(^uint64(0), mysql.TypeDatetime, 0).Validate(); err == nil {
		t.Error("garbage packed time validated")
	}
}

// Duration: text round-trip at every fsp (rule V8).
func TestPropertyDuration(t *testing.T) {
	r := newRand(t)
	for i := 0; i < 5000; i++ {
		fsp := r.Intn(7)
		unit := int64(pow10[9-fsp]) // ns per fsp step
		ns := (r.Int63n(2*MaxDurationNanos+1) - MaxDurationNanos) / unit * unit
		d := Duration{Nanos: ns, Fsp: fsp}
		p, err := ParseDuration(d.String(), fsp)
		if err != nil || p != d {
			t.Fatalf("%d ns fsp %d → %q → %+v %v", ns, fsp, d.String(), p, err)
		}
	}
	if _, err := ParseDuration("839:00:00", 0); err == nil {
		t.Error("839h accepted")
	}
}

func randJSON(r *rand.Rand, depth int) any {
	k := r.Intn(10)
	if depth > 4 {
		k = r.Intn(7)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return r.Intn(2) == 0
	case 2:
		return int64(r.Uint64())
	case 3:
		return r.Uint64() | 1<<63
	case 4:
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return 0.5
		}
		if r.Intn(4) == 0 {
			return float64(r.Intn(1000)) // integral doubles keep their type
		}
		return f
	case 5, 6:
		b := make([]byte, r.Intn(20))
		for i := range b {
			b[i] = byte(r.Intn(128))
		}
		return string(b) + "é中"
	case 7:
		n := r.Intn(5)
		a := make([]any, n)
		for i := range a {
			a[i] = randJSON(r, depth+1)
		}
		return a
	default:
		n := r.Intn(5)
		m := map[string]any{}
		for i := 0; i < n; i++ {
			m[randDigits(r, r.Intn(4))+"k"] = randJSON(r, depth+1)
		}
		return m
	}
}

// JSON: Go value → binary → text → binary gives the same bytes (V9, V10).
func TestPropertyJSON(t *testing.T) {
	r := newRand(t)
	for i := 0; i < 2000; i++ {
		v := randJSON(r, 0)
		j, err := BinaryJSONFromGo(v)
		if err != nil {
			t.Fatalf("%#v: %v", v, err)
		}
		txt, err := j.AppendText(nil)
		if err != nil {
			t.Fatalf("%#v: text: %v", v, err)
		}
		k, err := ParseJSON(txt)
		if err != nil {
			t.Fatalf("%s: reparse: %v", txt, err)
		}
		if k.TypeCode != j.TypeCode || !bytes.Equal(k.Value, j.Value) {
			t.Fatalf("%s: bytes differ after text round trip", txt)
		}
		if _, err := BinaryJSONFromTyped(j.AppendTyped(nil)); err != nil {
			t.Fatalf("%s: view: %v", txt, err)
		}
	}
}

// JSON scalar types that have no JSON text form render as strings.
func TestJSONTypedScalars(t *testing.T) {
	tm, _ := ParseTime("2024-02-29 13:14:15.5", mysql.TypeDatetime, 1)
	dt, _ := ParseTime("2024-02-29", mysql.TypeDate, 0)
	cases := []struct {
		v    any
		want string
	}{
		{tm, `"2024-02-29 13:14:15.500000"`},
		{dt, `"2024-02-29"`},
		{Duration{Nanos: -int64(90 * time.Minute), Fsp: 2}, `"-01:30:00.000000"`},
		{TimeFromGo(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC), mysql.TypeTimestamp, 0), `"2020-01-02 03:04:05.000000"`},
		{2.0, `2.0`},
		{-0.0, `0.0`},
		{123456789012345.0, `123456789012345.0`},
		{JSONOpaque{Type: mysql.TypeVarString, Data: []byte("ab")}, `"base64:type253:YWI="`},
		{[]any{"<&>\u2028\x01\t"}, `["<&>\u2028\u0001\t"]`},
		{1e-7, `0.0000001`},
		{1e15, `1e15`},
		{-1.5e-20, `-1.5e-20`},
	}
	for _, c := range cases {
		j, err := BinaryJSONFromGo(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := j.String(); got != c.want {
			t.Errorf("%#v: %s, want %s", c.v, got, c.want)
		}
	}
}

// Vector, enum, set, bit round trips (V11, V12).
func TestPropertyVectorEnumSetBit(t *testing.T) {
	r := newRand(t)
	for i := 0; i < 1000; i++ {
		n := r.Intn(20)
		fs := make([]float32, n)
		for k := range fs {
			fs[k] = float32(r.NormFloat64() * math.Pow(10, float64(r.Intn(20)-10)))
		}
		b, err := AppendVectorFloat32(nil, fs)
		if err != nil {
			t.Fatal(err)
		}
		v, err := VectorFloat32FromBytes(b)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseVectorFloat32(v.String())
		if err != nil || len(back) != n {
			t.Fatalf("%s: %v", v.String(), err)
		}
		for k := range fs {
			if back[k] != fs[k] || v.At(k) != fs[k] {
				t.Fatalf("element %d: %v vs %v", k, back[k], fs[k])
			}
		}
		elems := []string{"a", "b", "c", "d", "e"}
		bits := uint64(r.Intn(32))
		names, err := SetNames(elems, bits)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := SetBits(elems, names); err != nil || got != bits {
			t.Fatalf("set %b → %q → %b %v", bits, names, got, err)
		}
		idx := uint64(r.Intn(6))
		name, _ := EnumName(elems, idx)
		if got, err := EnumIndex(elems, name); err != nil || got != idx {
			t.Fatalf("enum %d → %q → %d", idx, name, got)
		}
		w := 1 + r.Intn(8)
		bv := r.Uint64() >> uint(64-8*w)
		if got, _ := BitValue(BitBytes(nil, bv, w)); got != bv {
			t.Fatalf("bit %x width %d", bv, w)
		}
	}
	if _, err := AppendVectorFloat32(nil, []float32{float32(math.NaN())}); err == nil {
		t.Error("NaN accepted")
	}
	if _, err := SetNames([]string{"a"}, 2); err == nil {
		t.Error("set bit beyond elems accepted")
	}
	if _, err := EnumName([]string{"a"}, 2); err == nil {
		t.Error("enum index beyond elems accepted")
	}
}

// Datums of fixed-size kinds do not allocate.
func TestDatumNoAlloc(t *testing.T) {
	bin, _ := MustParseDecimal("12.5").AppendBin(nil, 10, 2)
	allocs := testing.AllocsPerRun(100, func() {
		d := NewIntDatum(5)
		_ = d.GetInt64()
		d = NewFloat64Datum(1.5)
		_ = d.GetFloat64()
		d = NewTimeDatum(1, mysql.TypeDatetime, 0)
		_ = d.GetTime()
		d = NewDecimalDatumBin(bin, 10, 2)
		_, _ = d.GetDecimal()
		d = NewEnumDatum(1, "a")
		_ = d.GetBytes()
	})
	if allocs != 0 {
		t.Fatalf("%v allocs", allocs)
	}
}

// Hostile binary JSON: entries pointing back into their own container,
// unknown literals, depth beyond 100 and truncation are errors, not hangs
// or panics (rule V9).
func TestJSONHostile(t *testing.T) {
	// Array of 2 elements whose values both point at offset 0 (itself).
	self := []byte{JSONTypeCodeArray, 2, 0, 0, 0, 18, 0, 0, 0, 3, 0, 0, 0, 0, 3, 0, 0, 0, 0}
	if _, err := NewJSONDatum(self).AppendText(nil); err == nil {
		t.Error("self-referencing array accepted")
	}
	if _, err := NewJSONDatum([]byte{JSONTypeCodeLiteral, 7}).AppendText(nil); err == nil {
		t.Error("unknown literal accepted")
	}
	if _, err := NewJSONDatum([]byte{0x02, 0}).AppendText(nil); err == nil {
		t.Error("MySQL small object type code accepted")
	}
	deep := "1"
	for i := 0; i < MaxJSONDepth+2; i++ {
		deep = "[" + deep + "]"
	}
	if _, err := ParseJSON([]byte(deep)); err == nil {
		t.Error("depth beyond 100 accepted by the encoder")
	}
	good, _ := ParseJSON([]byte(`{"a":[1,2],"b":"x"}`))
	typed := good.AppendTyped(nil)
	for n := 0; n < len(typed); n++ {
		if _, err := NewJSONDatum(typed[:n]).AppendText(nil); err == nil {
			t.Errorf("truncated to %d bytes accepted", n)
		}
	}
}

func TestGoConversions(t *testing.T) {
	loc := time.FixedZone("UTC+8", 8*3600)
	g := time.Date(2024, 2, 29, 21, 14, 15, 123456789, loc)
	ts, err := TimeFromGoRounded(g, mysql.TypeTimestamp, 3)
	if err != nil || ts.String() != "2024-02-29 13:14:15.123" {
		t.Errorf("timestamp stored in UTC: %s %v", ts, err)
	}
	dt, _ := TimeFromGoRounded(time.Date(2024, 12, 31, 23, 59, 59, 999999999, time.UTC), mysql.TypeDatetime, 6)
	if dt.String() != "2025-01-01 00:00:00.000000" {
		t.Errorf("rounding carry: %s", dt)
	}
	d, err := DurationFromGo(-(time.Hour + 1500*time.Microsecond), 2)
	if err != nil || d.String() != "-01:00:00.00" {
		t.Errorf("duration: %s %v", d, err)
	}
	if _, err := DurationFromGo(900*time.Hour, 0); err == nil {
		t.Error("900h accepted")
	}
	if s := DecimalFromInt64(-42).String(); s != "-42" {
		t.Errorf("decimal %s", s)
	}
	if s := DecimalFromUint64(18446744073709551615).String(); s != "18446744073709551615" {
		t.Errorf("decimal %s", s)
	}
}

func TestConvertTZ(t *testing.T) {
	tm, _ := ParseTime("2024-02-29 13:14:15.123", mysql.TypeTimestamp, 3)
	got, err := tm.ConvertTZ(time.UTC, time.FixedZone("UTC+8", 8*3600))
	if err != nil || got.String() != "2024-02-29 21:14:15.123" {
		t.Fatalf("%s %v", got, err)
	}
	zero := Time{Type: mysql.TypeTimestamp}
	if z, err := zero.ConvertTZ(time.UTC, time.FixedZone("x", 3600)); err != nil || z != zero {
		t.Fatalf("zero timestamp converted: %v %v", z, err)
	}
}
