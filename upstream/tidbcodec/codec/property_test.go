package codec

import (
	"bytes"
	"cmp"
	"math"
	"math/rand"
	"strconv"
	"testing"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/internal/seedtest"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// newRand returns the property tests' seeded source (seedtest: -seed,
// $TIDBCODEC_SEED, or the clock; logged on failure).
func newRand(t *testing.T) *rand.Rand { return seedtest.Rand(t) }

func randInt(r *rand.Rand) int64 {
	switch r.Intn(4) {
	case 0:
		return int64(r.Intn(512) - 256)
	case 1:
		return []int64{math.MinInt64, math.MaxInt64, 0, -1}[r.Intn(4)]
	default:
		return int64(r.Uint64())
	}
}

func randFloat(r *rand.Rand) float64 {
	switch r.Intn(4) {
	case 0:
		return []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64}[r.Intn(7)]
	case 1:
		return r.NormFloat64()
	default:
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) {
			return 1
		}
		return f
	}
}

func randBytes(r *rand.Rand) []byte {
	b := make([]byte, r.Intn(30))
	for i := range b {
		if r.Intn(3) == 0 {
			b[i] = []byte{0, 0xff, 0xf7, 0xfe}[r.Intn(4)]
		} else {
			b[i] = byte(r.Intn(256))
		}
	}
	return b
}

// Numbers round-trip and their comparable bytes order like the numbers;
// desc forms order in reverse (rules K2, K3, K4).
func TestPropertyNumbers(t *testing.T) {
	r := newRand(t)
	for i := 0; i < 20000; i++ {
		a, b := randInt(r), randInt(r)
		ea, eb := EncodeInt(nil, a), EncodeInt(nil, b)
		if _, v, _ := DecodeInt(ea); v != a {
			t.Fatalf("int %d → %d", a, v)
		}
		if bytes.Compare(ea, eb) != cmp.Compare(a, b) {
			t.Fatalf("int order %d %d", a, b)
		}
		da, db := EncodeIntDesc(nil, a), EncodeIntDesc(nil, b)
		if _, v, _ := DecodeIntDesc(da); v != a || bytes.Compare(da, db) != cmp.Compare(b, a) {
			t.Fatalf("int desc %d %d", a, b)
		}
		ua, ub := uint64(a), uint64(b)
		if _, v, _ := DecodeUint(EncodeUint(nil, ua)); v != ua || bytes.Compare(EncodeUint(nil, ua), EncodeUint(nil, ub)) != cmp.Compare(ua, ub) {
			t.Fatalf("uint %d %d", ua, ub)
		}
		if _, v, _ := DecodeUintDesc(EncodeUintDesc(nil, ua)); v != ua {
			t.Fatalf("uint desc %d", ua)
		}
		if _, v, _ := DecodeVarint(EncodeVarint(nil, a)); v != a {
			t.Fatalf("varint %d", a)
		}
		if _, v, _ := DecodeUvarint(EncodeUvarint(nil, ua)); v != ua {
			t.Fatalf("uvarint %d", ua)
		}
		ca, cb := EncodeComparableVarint(nil, a), EncodeComparableVarint(nil, b)
		if rest, v, err := DecodeComparableVarint(ca); err != nil || v != a || len(rest) != 0 {
			t.Fatalf("cmp varint %d → %d rest %x err %v", a, v, rest, err)
		}
		if bytes.Compare(ca, cb) != cmp.Compare(a, b) {
			t.Fatalf("cmp varint order %d %d: %x %x", a, b, ca, cb)
		}
		cua, cub := EncodeComparableUvarint(nil, ua), EncodeComparableUvarint(nil, ub)
		if rest, v, err := DecodeComparableUvarint(cua); err != nil || v != ua || len(rest) != 0 {
			t.Fatalf("cmp uvarint %d", ua)
		}
		if bytes.Compare(cua, cub) != cmp.Compare(ua, ub) {
			t.Fatalf("cmp uvarint order %d %d", ua, ub)
		}
		fa, fb := randFloat(r), randFloat(r)
		efa, efb := EncodeFloat(nil, fa), EncodeFloat(nil, fb)
		if _, v, _ := DecodeFloat(efa); math.Float64bits(v) != math.Float64bits(fa) {
			t.Fatalf("float %v → %v", fa, v)
		}
		if _, v, _ := DecodeFloatDesc(EncodeFloatDesc(nil, fa)); math.Float64bits(v) != math.Float64bits(fa) {
			t.Fatalf("float desc %v", fa)
		}
		if fa != fb && bytes.Compare(efa, efb) != cmp.Compare(fa, fb) {
			t.Fatalf("float order %v %v", fa, fb)
		}
	}
}

// Memcomparable bytes round-trip, order like the raw bytes, concatenate
// safely, and the desc form reverses the order (rule K5).
//
// Rule K6: compact bytes round-trip.
func TestPropertyBytes(t *testing.T) {
	r := newRand(t)
	buf := make([]byte, 0, 64)
	for i := 0; i < 20000; i++ {
		a, b := randBytes(r), randBytes(r)
		ea := EncodeBytes(nil, a)
		if len(ea) != EncodedBytesLen(len(a)) {
			t.Fatalf("len %d", len(ea))
		}
		tail := []byte{0x42}
		rest, back, err := DecodeBytes(append(ea, tail...), buf)
		if err != nil || !bytes.Equal(back, a) || !bytes.Equal(rest, tail) {
			t.Fatalf("%x → %x rest %x err %v", a, back, rest, err)
		}
		if n, err := PeekBytesLen(ea, false); err != nil || n != len(ea) {
			t.Fatalf("peek %d %v", n, err)
		}
		eb := EncodeBytes(nil, b)
		if bytes.Compare(ea, eb) != bytes.Compare(a, b) {
			t.Fatalf("order %x %x", a, b)
		}
		da, db := EncodeBytesDesc(nil, a), EncodeBytesDesc(nil, b)
		if _, back, err := DecodeBytesDesc(da, nil); err != nil || !bytes.Equal(back, a) {
			t.Fatalf("desc %x → %x %v", a, back, err)
		}
		if n, err := PeekBytesLen(da, true); err != nil || n != len(da) {
			t.Fatalf("desc peek %d %v", n, err)
		}
		if bytes.Compare(da, db) != bytes.Compare(b, a) {
			t.Fatalf("desc order %x %x", a, b)
		}
		if rest, back, err := DecodeCompactBytes(EncodeCompactBytes(nil, a)); err != nil || !bytes.Equal(back, a) || len(rest) != 0 {
			t.Fatalf("compact %x", a)
		}
	}
}

func randDatum(r *rand.Rand) value.Datum {
	switch r.Intn(12) {
	case 0:
		return value.NewNullDatum()
	case 1:
		return value.NewIntDatum(randInt(r))
	case 2:
		return value.NewUintDatum(r.Uint64())
	case 3:
		return value.NewFloat64Datum(randFloat(r))
	case 4:
		return value.NewBytesDatum(randBytes(r))
	case 5:
		d, _ := value.NewDecimalDatum(value.MustParseDecimal(strconv.FormatInt(randInt(r)%1e15, 10)+"."+strconv.Itoa(r.Intn(1000))), 30, 3+r.Intn(5))
		return d
	case 6:
		return value.NewDurationDatum(r.Int63n(2*value.MaxDurationNanos)-value.MaxDurationNanos, value.MaxFsp)
	case 7:
		j, _ := value.ParseJSON([]byte(`{"a":[1,"x",null],"b":` + strconv.FormatInt(randInt(r), 10) + `}`))
		return value.NewJSONDatum(j.AppendTyped(nil))
	case 8:
		v, _ := value.AppendVectorFloat32(nil, []float32{float32(r.NormFloat64()), 1, 2})
		return value.NewVectorFloat32Datum(v)
	case 9:
		return value.NewTimeDatum(r.Uint64()>>1, 12, 6)
	case 10:
		return value.NewMaxValueDatum()
	default:
		return value.NewStringDatum(string(randBytes(r)))
	}
}

// What DecodeOne gives back for a datum without a schema (rule K9).
func expectDecoded(d value.Datum) value.Datum {
	switch d.Kind() {
	case value.KindString:
		return value.NewBytesDatum(d.GetBytes())
	case value.KindTime:
		return value.NewUintDatum(d.GetUint64())
	}
	return d
}

func sameDatum(a, b value.Datum) bool {
	if a.Kind() != b.Kind() {
		return false
	}
	switch a.Kind() {
	case value.KindFloat64:
		return math.Float64bits(a.GetFloat64()) == math.Float64bits(b.GetFloat64())
	case value.KindBytes:
		return bytes.Equal(a.GetBytes(), b.GetBytes())
	}
	return a.Equal(&b)
}

// Datums round-trip through both forms, several in a row, and PeekLength
// agrees with the decoder (rules K7-K10).
func TestPropertyDatums(t *testing.T) {
	r := newRand(t)
	for i := 0; i < 5000; i++ {
		ds := make([]value.Datum, 1+r.Intn(4))
		for k := range ds {
			ds[k] = randDatum(r)
		}
		for _, enc := range []func([]byte, ...value.Datum) ([]byte, error){EncodeKey, EncodeValue} {
			b, err := enc(nil, ds...)
			if err != nil {
				t.Fatalf("encode %v: %v", ds, err)
			}
			rest := b
			for k := range ds {
				n, err := PeekLength(rest)
				if err != nil {
					t.Fatalf("peek datum %d of %x: %v", k, b, err)
				}
				r2, got, err := DecodeOne(rest)
				if err != nil || len(rest)-len(r2) != n {
					t.Fatalf("decode datum %d of %x: n=%d peek=%d err %v", k, b, len(rest)-len(r2), n, err)
				}
				if want := expectDecoded(ds[k]); !sameDatum(got, want) {
					t.Fatalf("datum %d: got %s %v, want %s %v", k, got.Kind(), got, want.Kind(), want)
				}
				rest = r2
			}
			if len(rest) != 0 {
				t.Fatalf("trailing %x", rest)
			}
		}
	}
	// Key form of same-kind datums orders like the values.
	for i := 0; i < 5000; i++ {
		a, b := randInt(r), randInt(r)
		ka, _ := EncodeKey(nil, value.NewIntDatum(a), value.NewBytesDatum([]byte("x")))
		kb, _ := EncodeKey(nil, value.NewIntDatum(b), value.NewBytesDatum([]byte("x")))
		if a != b && bytes.Compare(ka, kb) != cmp.Compare(a, b) {
			t.Fatalf("key order %d %d", a, b)
		}
	}
}
