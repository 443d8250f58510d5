package vector

import (
	"encoding/binary"
	"math"
	"testing"
)

func floatsOf(b []byte, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		if len(b) >= 4 {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b))
			b = b[4:]
		}
	}
	return v
}

// FuzzUpsertSearch: arbitrary float bit patterns (NaN, Inf, denormals, zero)
// and dimensions never panic; rejected vectors leave the index unchanged;
// an accepted vector is its own nearest neighbour under L2.
func FuzzUpsertSearch(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 64}, []byte{0, 0, 0, 0}, uint8(2))
	f.Add([]byte{0, 0, 192, 127}, []byte{1, 2, 3, 4}, uint8(1))
	f.Add([]byte{255, 255, 127, 127, 255, 255, 127, 255}, []byte{}, uint8(3))
	f.Fuzz(func(t *testing.T, a, q []byte, dim uint8) {
		d := int(dim%8) + 1
		for _, m := range []Metric{Cosine, L2} {
			x, err := NewWithOptions(d, m, Options{HNSWThreshold: 2})
			if err != nil {
				t.Fatal(err)
			}
			_ = x.Upsert("base1", floatsOf([]byte{0, 0, 128, 63}, d))
			_ = x.Upsert("base2", floatsOf([]byte{0, 0, 128, 191}, d))
			before := x.Len()
			v := floatsOf(a, d)
			if err := x.Upsert("a", v); err != nil {
				if x.Len() != before {
					t.Fatalf("rejected upsert changed Len: %v", err)
				}
			}
			if _, err := x.Search(floatsOf(q, d), 3); err != nil {
				_ = err // invalid query vectors are errors, not panics
			}
			if _, err := x.Search(floatsOf(a, d+1), 1); err == nil {
				t.Fatal("dimension mismatch accepted")
			}
			if m == L2 {
				if _, ok := x.Get("a"); ok {
					h, err := x.SearchExact(v, 1, func(pk string) bool { return pk == "a" })
					if err != nil || len(h) != 1 {
						t.Fatalf("own vector not found: %v %v", h, err)
					}
				}
			}
		}
	})
}
