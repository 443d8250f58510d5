package adapter

import (
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/verify"
)

// TestSR3_CheckPageByPageFindsEveryKindOfDifference (specs/sfemu-run.md
// SR3): the check compares a table with its collection a page of rows at
// a time (rows looked up by key, then the collection scanned for
// documents no row produced), over more rows than one page: equal at the
// mirror's ts; with the adapter stopped, a deleted row's document, a
// changed row and a new row are each reported once.
func TestSR3_CheckPageByPageFindsEveryKindOfDifference(t *testing.T) {
	const rows = 10_000 // more than two upstream pages and ten collection pages
	r := newBigTxnRig(t, 256<<20)
	r.bigTxn(t, 1, rows, 20)
	r.waitConsistent(t, bulkTables, 5*time.Minute)
	if err := r.a.Close(); err != nil {
		t.Fatal(err)
	}
	r.exec(t, "DELETE FROM shop.bulk WHERE id = 7")
	r.exec(t, "UPDATE shop.bulk SET v = -5 WHERE id = 9000")
	r.exec(t, "INSERT INTO shop.bulk VALUES (20000, 1, 'new', 'x')")
	after, err := r.up.Cluster.CurrentTs(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := verify.CheckConsistency(r.ctx, r.up.Snapshot(), r.emu, bulkTables, after)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"pk=20000: row missing from the collection",
		"pk=7: document has no upstream row",
		`pk=9000: field "v": expected int -5, actual int 9000`,
	}
	if len(diffs) != len(want) {
		t.Fatalf("want %d diffs, got %v", len(want), diffs)
	}
	for i, w := range want {
		if !strings.HasSuffix(diffs[i].String(), w) {
			t.Fatalf("diff %d = %q, want one ending in %q (all: %v)", i, diffs[i], w, diffs)
		}
	}
}
