package adapter

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/verify"
)

// TestLT3_DropOfFilteredTable: a table the filter follows is dropped
// while the adapter streams: its collection is dropped by the DDL (N29)
// and the table unsubscribed, in place (same runtime, no restart); the
// other tables keep flowing. A new table created under the same name
// matches the filter and, its predecessor's collection being dropped
// (LT4 applies only to a collection that is not), is mirrored from its
// first row.
func TestLT3_DropOfFilteredTable(t *testing.T)      { testDropFiltered(t, false) }
func TestLT3_Wire_DropOfFilteredTable(t *testing.T) { testDropFiltered(t, true) }

func testDropFiltered(t *testing.T, wire bool) {
	r := newShopRig(t, wire)
	var log bytes.Buffer
	var logMu sync.Mutex
	a := startFiltered(t, r, "shop.*", &log, &logMu)
	rt := a.RT
	for i := 1; i <= 5; i++ {
		r.exec("INSERT INTO shop.products VALUES " + typedRow(r.rng, i))
		r.exec(fmt.Sprintf("INSERT INTO shop.orders VALUES (%d, 1.0, 'before', NULL)", i))
	}
	r.exec("DROP TABLE shop.products")
	for i := 6; i <= 9; i++ {
		r.exec(fmt.Sprintf("INSERT INTO shop.orders VALUES (%d, 2.0, 'after', NULL)", i))
	}
	r.exec("CREATE TABLE shop.products (id BIGINT PRIMARY KEY, title VARCHAR(10))")
	r.exec("INSERT INTO shop.products VALUES (1, 'new')")
	final := r.exec("INSERT INTO shop.orders VALUES (10, 3.0, 'last', NULL)")

	tables := []TableRef{{DB: "shop", Table: "orders"}, {DB: "shop", Table: "products"}}
	if err := verify.WaitSafe(r.ctx, r.emu, tables, final, 30*time.Second); err != nil {
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("%v (runtime: %v; log:\n%s)", err, rt.Err(), log.String())
	}
	// The new shop.products holds its one row, none of the dropped
	// table's five (LT3, N29), and shop.orders every row.
	expectConsistent(t, r.ctx, r.up, r.emu, tables, final)
	if got := fmt.Sprint(a.MirroredTables()); got != "[shop.orders shop.products]" && got != "[shop.products shop.orders]" {
		t.Errorf("mirrored tables %s, want shop.orders and the new shop.products", got)
	}
	if a.RT != rt || rt.Err() != nil {
		t.Fatalf("the runtime changed or stopped: %v", rt.Err())
	}
	select {
	case <-rt.Done():
		t.Fatal("the runtime stopped for a DROP TABLE")
	default:
	}
}
