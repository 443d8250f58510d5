package sim

import (
	"math/rand"
	"strconv"
	"strings"

	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/verify"
)

// Table-level DDL of the workload (SIM4): RENAME TABLE of items and of
// the partitioned orders (back and forth between <t> and <t>_r) and DROP
// TABLE of notes, with inserts into notes until it is dropped. They are
// drawn from a stream of their own, so that adding them left the rest of
// every seed's workload as it was. The table list is a plain list (no
// filter): a renamed table keeps feeding its collection under its old
// name (N3), and a dropped one's collection is dropped (N29).
type tableSet struct {
	rng     *rand.Rand
	names   map[string]string // logical name -> current name
	dropped map[string]bool
	nextID  int
}

// logicalTables are the mirrored tables by the names they were created
// with, which name their collections.
var logicalTables = []string{"items", "orders", "ledger", "notes"}

func newTableSet(seed int64) *tableSet {
	ts := &tableSet{rng: rand.New(rand.NewSource(seed*7919 + 6)), names: map[string]string{}, dropped: map[string]bool{}}
	for _, t := range logicalTables {
		ts.names[t] = t
	}
	return ts
}

// refs are the mirrored tables now: current names, collections named
// after the logical ones; a dropped table is not mirrored any more.
func (ts *tableSet) refs() []verify.TableRef {
	var out []verify.TableRef
	for _, t := range logicalTables {
		if ts.dropped[t] {
			continue
		}
		ref := verify.TableRef{DB: "simdb", Table: ts.names[t]}
		if ref.Table != t {
			ref.Collection = normalize.DefaultCollectionName("simdb", t)
		}
		out = append(out, ref)
	}
	return out
}

// otherName is the table's other name: a consistency check at a safe_ts
// before a rename reads the table by the name it had then.
func otherName(ref verify.TableRef) verify.TableRef {
	if n, ok := strings.CutSuffix(ref.Table, "_r"); ok {
		ref.Table = n
	} else {
		ref.Table += "_r"
	}
	if ref.Collection == "" { // it had its logical name: the collection's
		ref.Collection = normalize.DefaultCollectionName("simdb", strings.TrimSuffix(ref.Table, "_r"))
	}
	return ref
}

// current rewrites a statement written with logical names to the current
// ones ("simdb.items " -> "simdb.items_r ").
func (ts *tableSet) current(q string) string {
	q += " "
	for _, t := range logicalTables {
		if cur := ts.names[t]; cur != t {
			q = strings.ReplaceAll(q, "simdb."+t+" ", "simdb."+cur+" ")
		}
	}
	return q[:len(q)-1]
}

// tableStep runs the stream's action of this workload step, if any.
func (wl *workload) tableStep() {
	ts := wl.tables
	r := ts.rng
	switch x := r.Intn(40); {
	case x < 2:
		t := []string{"items", "orders"}[r.Intn(2)]
		cur, next := ts.names[t], t+"_r"
		if cur != t {
			next = t
		}
		if wl.execRaw("RENAME TABLE simdb."+cur+" TO simdb."+next) == nil {
			ts.names[t] = next
		}
	case x == 2:
		if !ts.dropped["notes"] && wl.execRaw("DROP TABLE simdb.notes") == nil {
			ts.dropped["notes"] = true
		}
	case x < 9:
		if !ts.dropped["notes"] {
			ts.nextID++
			wl.exec(noteInsert(ts.nextID, r))
		}
	}
}

func noteInsert(id int, r *rand.Rand) string {
	return "REPLACE INTO simdb.notes (id, body) VALUES (" + strconv.Itoa(id%300) + ", 'note " + strconv.Itoa(r.Intn(1000)) + "')"
}
