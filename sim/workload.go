package sim

import (
	"context"
	"fmt"
	"math/rand"
	"strings"

	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
	"github.com/searchfabric/sfemu/verify"
)

// The mirrored tables (SIM4): items (one physical table), orders (RANGE
// partitioned: three physical tables, a fourth added and dropped by DDL)
// and ledger, whose raw id band (40 <= id%100 < 60) only the stuck-lock
// fault writes: the SQL front scans a whole table for UPDATE and DELETE,
// so a pending lock in a table SQL updates would block the workload;
// SQL only inserts into ledger, outside the band.
var schema = []string{
	"CREATE DATABASE simdb",
	"CREATE TABLE simdb.items (id BIGINT PRIMARY KEY, title VARCHAR(64) NOT NULL, qty INT NOT NULL DEFAULT 0, note TEXT)",
	"CREATE TABLE simdb.orders (id BIGINT PRIMARY KEY, item BIGINT, amount DECIMAL(10,2), status VARCHAR(16)) " +
		"PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (200), PARTITION p1 VALUES LESS THAN (400), PARTITION p2 VALUES LESS THAN (600))",
	"CREATE TABLE simdb.ledger (id BIGINT PRIMARY KEY, title VARCHAR(64) NOT NULL, qty INT NOT NULL DEFAULT 0)",
	"CREATE TABLE simdb.notes (id BIGINT PRIMARY KEY, body VARCHAR(64))",
}

func (w *world) refs() []verify.TableRef { return w.wl.tables.refs() }

// workload is the seeded SQL workload: its own random stream, so the
// statements do not depend on the fault schedule.
type workload struct {
	w      *world
	rng    *rand.Rand
	ss     *sqlfront.Session
	extra  []string // columns added to items by DDL, not dropped yet
	nextC  int
	hasP3  bool
	index  bool
	ledger int64
	tables *tableSet // RENAME and DROP TABLE (tableddl.go)
}

// exec runs one statement; a statement the SQL front refuses (duplicate
// key, a partition that does not exist) writes nothing (S4) and is part
// of the trace.
func (wl *workload) exec(q string) {
	if wl.tables != nil {
		q = wl.tables.current(q)
	}
	_ = wl.execRaw(q)
}

// execRaw runs q as it is written.
func (wl *workload) execRaw(q string) error {
	res, err := wl.ss.Exec(context.Background(), q)
	if err != nil {
		wl.w.trace("sql %s -> error %v", q, err)
		return err
	}
	wl.w.statements++
	wl.w.lastCommit = max(wl.w.lastCommit, res.CommitTs)
	wl.w.trace("sql %s -> %d rows ts %d", q, res.RowsAffected, res.CommitTs)
	return nil
}

func (wl *workload) itemRow(id int) string {
	return fmt.Sprintf("(%d, 'item %d s%d', %d, %s)", id, id, wl.w.step, wl.rng.Intn(100), wl.note())
}

func (wl *workload) note() string {
	if wl.rng.Intn(4) == 0 {
		return "NULL"
	}
	return fmt.Sprintf("'note %d'", wl.rng.Intn(1000))
}

func (wl *workload) orderRow(id int) string {
	return fmt.Sprintf("(%d, %d, %d.%02d, '%s')", id, wl.rng.Intn(300), wl.rng.Intn(1000), wl.rng.Intn(100), []string{"new", "paid", "sent"}[wl.rng.Intn(3)])
}

func (wl *workload) orderID() int {
	limit := 600
	if wl.hasP3 {
		limit = 800
	}
	return wl.rng.Intn(limit)
}

// step runs one workload action.
func (wl *workload) step() {
	r := wl.rng
	switch op := r.Intn(100); {
	case op < 20: // multi-row insert into items (several regions)
		var rows []string
		for i := 0; i < 1+r.Intn(5); i++ {
			rows = append(rows, wl.itemRow(r.Intn(400)))
		}
		verb := "INSERT"
		if r.Intn(2) == 0 {
			verb = "REPLACE"
		}
		wl.exec(fmt.Sprintf("%s INTO simdb.items (id, title, qty, note) VALUES %s", verb, strings.Join(rows, ", ")))
	case op < 35: // orders across partitions
		var rows []string
		for i := 0; i < 1+r.Intn(4); i++ {
			rows = append(rows, wl.orderRow(wl.orderID()))
		}
		wl.exec("REPLACE INTO simdb.orders (id, item, amount, status) VALUES " + strings.Join(rows, ", "))
	case op < 45: // single-row and range updates
		if r.Intn(2) == 0 {
			wl.exec(fmt.Sprintf("UPDATE simdb.items SET qty = qty + 1, title = 'upd s%d' WHERE id = %d", wl.w.step, r.Intn(400)))
		} else {
			lo := r.Intn(400)
			wl.exec(fmt.Sprintf("UPDATE simdb.items SET qty = qty + %d WHERE id >= %d AND id < %d", 1+r.Intn(5), lo, lo+1+r.Intn(60)))
		}
	case op < 52: // deletes
		if r.Intn(2) == 0 {
			wl.exec(fmt.Sprintf("DELETE FROM simdb.items WHERE id = %d", r.Intn(400)))
		} else {
			lo := wl.orderID()
			wl.exec(fmt.Sprintf("DELETE FROM simdb.orders WHERE id >= %d AND id < %d", lo, lo+1+r.Intn(30)))
		}
	case op < 58: // an update that moves an order to another partition
		id := r.Intn(400)
		wl.exec(fmt.Sprintf("UPDATE simdb.orders SET id = %d, status = 'moved' WHERE id = %d", id+200, id))
	case op < 70: // a multi-statement transaction over items and orders
		wl.exec("BEGIN")
		for i := 0; i < 2+r.Intn(4); i++ {
			switch r.Intn(4) {
			case 0:
				wl.exec("REPLACE INTO simdb.items (id, title, qty, note) VALUES " + wl.itemRow(r.Intn(400)))
			case 1:
				wl.exec("REPLACE INTO simdb.orders (id, item, amount, status) VALUES " + wl.orderRow(wl.orderID()))
			case 2:
				lo := r.Intn(400)
				wl.exec(fmt.Sprintf("UPDATE simdb.items SET note = 'tx s%d' WHERE id >= %d AND id < %d", wl.w.step, lo, lo+20))
			default:
				wl.exec(fmt.Sprintf("DELETE FROM simdb.orders WHERE id = %d", wl.orderID()))
			}
		}
		if r.Intn(6) == 0 {
			wl.exec("ROLLBACK")
		} else {
			wl.exec("COMMIT")
		}
	case op < 74: // a large transaction: spills past the memory quota
		wl.exec("BEGIN")
		base := 1000 + r.Intn(4)*1000
		n := 60 + r.Intn(200)
		for i := 0; i < n; i += 50 {
			var rows []string
			for j := i; j < min(n, i+50); j++ {
				rows = append(rows, fmt.Sprintf("(%d, 'bulk %d s%d', %d, 'bulk note %d')", base+j, base+j, wl.w.step, j%50, j))
			}
			wl.exec("REPLACE INTO simdb.items (id, title, qty, note) VALUES " + strings.Join(rows, ", "))
		}
		wl.exec("COMMIT")
	case op < 80: // ledger inserts outside the raw band
		id := int64(r.Intn(40)) + int64(r.Intn(5))*100
		wl.exec(fmt.Sprintf("INSERT INTO simdb.ledger (id, title, qty) VALUES (%d, 'sql %d', %d)", id, wl.w.step, r.Intn(9)))
	case op < 86: // DDL
		wl.ddl()
	default: // nothing: time passes
	}
	wl.tableStep()
}

// ddl runs one DDL of a kind the schema store handles (SIM4).
func (wl *workload) ddl() {
	r := wl.rng
	switch r.Intn(8) {
	case 0, 1:
		name := fmt.Sprintf("c%d", wl.nextC)
		wl.nextC++
		wl.exec(fmt.Sprintf("ALTER TABLE simdb.items ADD COLUMN %s INT DEFAULT %d", name, r.Intn(50)))
		wl.extra = append(wl.extra, name)
	case 2:
		if len(wl.extra) == 0 {
			return
		}
		i := r.Intn(len(wl.extra))
		wl.exec(fmt.Sprintf("ALTER TABLE simdb.items DROP COLUMN %s", wl.extra[i]))
		wl.extra = append(wl.extra[:i], wl.extra[i+1:]...)
	case 3:
		if len(wl.extra) == 0 {
			return
		}
		wl.exec(fmt.Sprintf("ALTER TABLE simdb.items MODIFY COLUMN %s BIGINT", wl.extra[r.Intn(len(wl.extra))]))
	case 4:
		if wl.index {
			wl.exec("ALTER TABLE simdb.items DROP INDEX iq")
		} else {
			wl.exec("ALTER TABLE simdb.items ADD INDEX iq (qty)")
		}
		wl.index = !wl.index
	case 5:
		wl.exec(fmt.Sprintf("ALTER TABLE simdb.orders TRUNCATE PARTITION p%d", r.Intn(3)))
	case 6:
		if wl.hasP3 {
			wl.exec("ALTER TABLE simdb.orders DROP PARTITION p3")
		} else {
			wl.exec("ALTER TABLE simdb.orders ADD PARTITION (PARTITION p3 VALUES LESS THAN (800))")
		}
		wl.hasP3 = !wl.hasP3
	case 7:
		wl.exec("TRUNCATE TABLE simdb.items")
	}
}

// stuckLock writes an abandoned prewrite into ledger's raw band: the lock
// holds the table's resolved ts until a resolver (the driver's stuck-lock
// task, or the world's sweep) commits or rolls it back (SIM5).
func (w *world) stuckLock(arg uint64) {
	ti, _, err := w.up.SQL.TableInfo("simdb", "ledger")
	if err != nil {
		w.trace("stuck-lock: %v", err)
		return
	}
	ids := map[string]int64{}
	for _, c := range ti.Columns {
		ids[c.Name.L] = c.ID
	}
	txn := w.c.Begin()
	txn.SetTTL(500 + arg%3000)
	n := 1 + int(arg%3)
	for i := 0; i < n; i++ {
		id := int64((arg>>8)%5)*100 + 40 + int64(w.rawNext%20)
		w.rawNext++
		key := tablecodec.EncodeIntRecordKey(nil, ti.ID, id)
		if i == 0 {
			txn.SetPrimary(key)
		}
		val, err := rowcodec.EncodeV2(nil, []int64{ids["title"], ids["qty"]},
			[]value.Datum{value.NewStringDatum(fmt.Sprintf("raw %d", id)), value.NewIntDatum(id % 7)}, nil)
		if err != nil {
			w.trace("stuck-lock encode: %v", err)
			return
		}
		txn.Set(key, val)
	}
	if err := txn.Prewrite(); err != nil {
		w.trace("stuck-lock prewrite: %v", err)
		_ = txn.Rollback()
		return
	}
	// Half of them commit their primary only: the resolver must finish
	// the secondaries; the rest are abandoned entirely.
	if arg%2 == 0 {
		if err := txn.CommitKeys(w.c.Oracle().Next(), txn.Primary()); err != nil {
			w.trace("stuck-lock primary commit: %v", err)
		}
	}
	w.trace("stuck-lock txn %d keys %d", txn.StartTs(), n)
}
