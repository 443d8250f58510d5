package vector

import (
	"fmt"
	"testing"
)

// VEC-S4: SearchKeys ranks every passing vector (k <= 0) and lists the same
// candidates; with k > 0 it returns the first k of that ranking.
func TestSearchKeysAgreeWithRanking(t *testing.T) {
	x, err := New(2, L2)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if err := x.Upsert(fmt.Sprint(i), []float32{float32(i), 0}); err != nil {
			t.Fatal(err)
		}
	}
	even := func(pk string) bool { return (pk[len(pk)-1]-'0')%2 == 0 }
	hits, keys, err := x.SearchKeys([]float32{0, 0}, 0, true, even)
	if err != nil || len(hits) != 25 || len(keys) != 25 {
		t.Fatalf("all: %d hits, %d keys, %v", len(hits), len(keys), err)
	}
	top, keys2, err := x.SearchKeys([]float32{0, 0}, 5, false, even)
	if err != nil || len(top) != 5 || len(keys2) != 25 {
		t.Fatalf("top: %v %d %v", top, len(keys2), err)
	}
	for i := range top {
		if top[i] != hits[i] {
			t.Fatalf("top %d: %v vs %v", i, top[i], hits[i])
		}
	}
	if _, _, err := x.SearchKeys([]float32{0}, 0, true, nil); err == nil {
		t.Fatal("VEC-E1: wrong dimension accepted")
	}
}
