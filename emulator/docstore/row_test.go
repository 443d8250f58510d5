package docstore

import (
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
)

// randValue is a value of a random kind (nil: the row does not carry it).
func randValue(rng *rand.Rand) *apiv1.Value {
	switch rng.Intn(12) {
	case 0:
		return nil
	case 1:
		return &apiv1.Value{}
	case 2:
		return &apiv1.Value{Kind: &apiv1.Value_NullValue{NullValue: true}}
	case 3:
		return &apiv1.Value{Kind: &apiv1.Value_Int64Value{Int64Value: rng.Int63() - rng.Int63()}}
	case 4:
		return &apiv1.Value{Kind: &apiv1.Value_Uint64Value{Uint64Value: rng.Uint64() >> uint(rng.Intn(64))}}
	case 5:
		return &apiv1.Value{Kind: &apiv1.Value_DoubleValue{DoubleValue: rng.NormFloat64() * 1e6}}
	case 6:
		return &apiv1.Value{Kind: &apiv1.Value_StringValue{StringValue: strings.Repeat("é", rng.Intn(80))}}
	case 7:
		b := make([]byte, rng.Intn(200))
		rng.Read(b)
		return &apiv1.Value{Kind: &apiv1.Value_BytesValue{BytesValue: b}}
	case 8:
		return &apiv1.Value{Kind: &apiv1.Value_BoolValue{BoolValue: rng.Intn(2) == 1}}
	case 9:
		return &apiv1.Value{Kind: &apiv1.Value_JsonValue{JsonValue: `{"a":` + strings.Repeat("1", 1+rng.Intn(5)) + `}`}}
	case 10:
		v := make([]float32, rng.Intn(5))
		for i := range v {
			v[i] = rng.Float32() - 0.5
		}
		return &apiv1.Value{Kind: &apiv1.Value_VectorValue{VectorValue: &apiv1.FloatVector{Values: v}}}
	}
	return &apiv1.Value{Kind: &apiv1.Value_Int64Value{Int64Value: int64(rng.Intn(300)) - 150}}
}

// E45: a compact row reads back every value it was built from, by name, by
// scratch, as text, in order and as the canonical map; a slot the row does
// not carry is absent (nil), never null, and null and unset values stay
// what they were.
func TestE45_CompactRowReadsBackEveryValue(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 500; round++ {
		n := 1 + rng.Intn(12)
		names := make([]string, n)
		vals := make([]*apiv1.Value, n)
		for i := range names {
			names[i] = "f" + strings.Repeat("x", i)
			vals[i] = randValue(rng)
		}
		layout := contract.NewLayout(names)
		e, err := NewRowEntry(7, layout, vals, "table:1")
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if len(e.Row) != cap(e.Row) {
			t.Fatalf("seed %d: row of %d bytes holds %d (not exact size)", seed, len(e.Row), cap(e.Row))
		}
		carried := 0
		var sc Scratch
		for i, want := range vals {
			got, gotSc := e.Field(names[i]), e.FieldScratch(names[i], &sc)
			if want == nil {
				if got != nil || gotSc != nil {
					t.Fatalf("seed %d: absent field %q reads %v", seed, names[i], got)
				}
				continue
			}
			carried++
			if !proto.Equal(got, want) || !proto.Equal(gotSc, want) {
				t.Fatalf("seed %d: field %q: got %v / %v, want %v", seed, names[i], got, gotSc, want)
			}
			wantText := want.GetStringValue()
			if j, ok := want.GetKind().(*apiv1.Value_JsonValue); ok {
				wantText = j.JsonValue
			}
			if w, g := want.GetVectorValue().GetValues(), e.Vector(names[i], make([]float32, 3)); len(w) > 0 && !slices.Equal(w, g) || len(w) == 0 && len(g) != 0 {
				t.Fatalf("seed %d: vector of %q: %v, want %v", seed, names[i], g, w)
			}
			if e.Text(names[i]) != wantText {
				t.Fatalf("seed %d: text of %q: %q, want %q", seed, names[i], e.Text(names[i]), wantText)
			}
		}
		if e.Field("nope") != nil || e.NumFields() != carried {
			t.Fatalf("seed %d: unknown field or count (%d, want %d)", seed, e.NumFields(), carried)
		}
		m := e.FieldMap()
		if len(m) != carried {
			t.Fatalf("seed %d: map of %d fields, want %d", seed, len(m), carried)
		}
		prev := -1
		e.Range(func(name string, v *apiv1.Value) bool {
			i := layout.Index(name)
			if i <= prev || !proto.Equal(v, vals[i]) || !proto.Equal(m[name], vals[i]) {
				t.Fatalf("seed %d: range at %q (position %d after %d): %v, want %v", seed, name, i, prev, v, vals[i])
			}
			prev = i
			return true
		})
		// The canonical map form of the same row stores the same row.
		me, err := NewMapEntry(7, layout, m, "table:1")
		if err != nil || string(me.Row) != string(e.Row) {
			t.Fatalf("seed %d: map entry %x vs row entry %x (%v)", seed, me.Row, e.Row, err)
		}
	}
}

// E45: every encoded value is accepted by ValueLen at its exact length,
// and no truncation of it is.
func TestE45_ValueLenChecksEncodedValues(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	for i := 0; i < 2000; i++ {
		v := randValue(rng)
		if v == nil {
			continue
		}
		enc, err := AppendValue(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := ValueLen(append(enc, 9, 9)); err != nil || n != len(enc) {
			t.Fatalf("seed %d: %v: length %d (%v), want %d", seed, v, n, err, len(enc))
		}
		for cut := 0; cut < len(enc); cut++ {
			if n, err := ValueLen(enc[:cut]); err == nil && n > cut {
				t.Fatalf("seed %d: %v cut at %d: accepted %d bytes", seed, v, cut, n)
			}
		}
	}
	for _, bad := range [][]byte{{kindAbsent}, {KindBool, 2}, {KindString, 1, 0xff}, {KindJSON, 2, 0xc3, 0x28}, {KindVector, 0xff, 0xff, 0xff, 0xff, 0x0f}} {
		if _, err := ValueLen(bad); err == nil {
			t.Fatalf("ValueLen accepted %x", bad)
		}
	}
}
