package adapter

import (
	"fmt"
	"testing"

	"github.com/searchfabric/sfemu/tablefilter"
)

// TestTF8_FilterResolvedAtStartTs: a filter resolves against the schema
// at the ts asked for, not now: a table created later is not in the
// start set; system schemas never are; the order is database then
// table; an empty match is an error naming the rules and the ts.
func TestTF8_FilterResolvedAtStartTs(t *testing.T)      { testFilterResolved(t, false) }
func TestTF8_Wire_FilterResolvedAtStartTs(t *testing.T) { testFilterResolved(t, true) }

func testFilterResolved(t *testing.T, wire bool) {
	r := newShopRig(t, wire)
	r.exec("CREATE TABLE shop.audit (id BIGINT PRIMARY KEY)")
	r.exec("CREATE DATABASE other")
	at := r.exec("CREATE TABLE other.notes (id BIGINT PRIMARY KEY)")
	r.exec("CREATE TABLE shop.order_lines (id BIGINT PRIMARY KEY)")

	for _, c := range []struct {
		rules string
		ts    uint64
		want  string
	}{
		{"shop.*,!shop.audit", at, "[shop.orders shop.products]"},
		{"shop.order*", at, "[shop.orders]"},
		{"shop.order*", 0, "[shop.order_lines shop.orders]"}, // 0 = now: the later table is there
		{"*.*", at, "[other.notes shop.audit shop.orders shop.products]"},
		{"/^OTH/.*,shop.p?oducts", at, "[other.notes shop.products]"},
	} {
		refs, ts, err := ResolveFilter(r.ctx, r.up, tablefilter.MustParse(c.rules), c.ts)
		if err != nil {
			t.Fatalf("%s at %d: %v", c.rules, c.ts, err)
		}
		if c.ts != 0 && ts != c.ts {
			t.Errorf("%s: resolved at %d, want %d", c.rules, ts, c.ts)
		}
		if got := fmt.Sprint(refs); got != c.want {
			t.Errorf("%s at %d: %s, want %s", c.rules, c.ts, got, c.want)
		}
		for _, ref := range refs {
			if ref.CollectionName() != ref.DB+"."+ref.Table {
				t.Errorf("%s: collection %q, want <db>.<table>", ref, ref.CollectionName())
			}
		}
	}
	// LT8: a filter that selects no table yet resolves to an empty set
	// (the adapter starts with it and picks tables up at their creation).
	refs, _, err := ResolveFilter(r.ctx, r.up, tablefilter.MustParse("mysql.*,nope.*"), at)
	if err != nil || len(refs) != 0 {
		t.Fatalf("empty match: %v, %v", refs, err)
	}
}
