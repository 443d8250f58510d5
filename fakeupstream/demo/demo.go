// Package demo is the demo schema and workload `sfemu run` drives through
// the fake upstream's SQL front: a products table with text, vector, numeric
// and JSON columns, and a hash-partitioned events table, changed by a steady,
// seeded mix of inserts, updates, deletes and an occasional DDL.
package demo

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream/mvcc"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
)

// Database is the demo database name.
const Database = "demo"

// Dim is the dimension of the products' embedding vectors.
const Dim = 8

// Schema creates the demo database and tables.
var Schema = []string{
	"CREATE DATABASE IF NOT EXISTS " + Database,
	"CREATE TABLE IF NOT EXISTS " + Database + ".products (" +
		"id BIGINT PRIMARY KEY, title VARCHAR(200) NOT NULL, description TEXT, " +
		"category VARCHAR(32), price DECIMAL(10,2), stock INT NOT NULL DEFAULT 0, " +
		"attrs JSON, embedding VECTOR(8), updated_at DATETIME(3))",
	"CREATE TABLE IF NOT EXISTS " + Database + ".events (" +
		"id BIGINT PRIMARY KEY, product_id BIGINT, kind VARCHAR(16), note VARCHAR(255)) " +
		"PARTITION BY HASH (id) PARTITIONS 4",
}

// Exists reports whether the demo schema (both tables) is already there,
// as on a restart over a durable upstream; Setup is idempotent anyway (IF
// NOT EXISTS writes nothing when the object exists).
func Exists(srv *sqlfront.Server) bool {
	for _, t := range []string{"products", "events"} {
		if _, _, err := srv.TableInfo(Database, t); err != nil {
			return false
		}
	}
	return true
}

// Setup runs Schema on a session.
func Setup(ctx context.Context, ss *sqlfront.Session) error {
	for _, q := range Schema {
		if _, err := ss.Exec(ctx, q); err != nil {
			return fmt.Errorf("demo: setup %q: %w", q, err)
		}
	}
	return nil
}

var (
	adjectives = []string{"red", "quiet", "rugged", "smart", "tiny", "vintage", "solar", "wireless", "organic", "foldable", "waterproof", "ceramic"}
	nouns      = []string{"lamp", "kettle", "backpack", "speaker", "bicycle", "notebook", "headphones", "tent", "camera", "chair", "watch", "blender"}
	categories = []string{"home", "outdoor", "audio", "office", "kitchen", "travel"}
	phrases    = []string{"built to last", "easy to clean", "ships fast", "award winning design", "quiet operation",
		"long battery life", "great for camping", "fits in any bag", "energy efficient", "a customer favourite"}
	kinds = []string{"view", "cart", "purchase", "review"}
)

// Workload is a seeded generator of demo changes. It is not safe for
// concurrent use.
type Workload struct {
	rng     *rand.Rand
	ss      *sqlfront.Session
	nextID  int64
	nextEv  int64
	live    []int64 // product ids that exist
	steps   int
	ddlStep int
	// lane and lanes: this workload writes only product and event ids
	// congruent to lane modulo lanes (SetLane).
	lane, lanes int64
	// DDLEvery is how many steps pass between DDLs (0 disables them).
	DDLEvery int
	// Now renders updated_at values; the caller supplies the clock.
	Now func() string
}

// NewWorkload creates a workload writing through ss.
func NewWorkload(seed int64, ss *sqlfront.Session) *Workload {
	return &Workload{rng: rand.New(rand.NewSource(seed)), ss: ss, nextID: 1, nextEv: 1, DDLEvery: 500, lanes: 1,
		Now: func() string { return "2024-01-01 00:00:00.000" }}
}

// SetLane makes w lane k of n workloads that run at the same time, each
// on its own session (S24): it inserts only product and event ids
// congruent to k modulo n and updates and deletes only the products it
// inserted (or, after Resume, the stored ones in its class), so two lanes
// never write the same row and a row's changes keep their order. Call it
// before Resume and the first Step.
func (w *Workload) SetLane(k, n int) {
	w.lane, w.lanes = int64(k), int64(max(n, 1))
	w.nextID, w.nextEv = w.align(1), w.align(1)
}

// align is the smallest id >= from in this lane's class.
func (w *Workload) align(from int64) int64 {
	return from + ((w.lane-from%w.lanes)%w.lanes+w.lanes)%w.lanes
}

// mine reports whether id is in this lane's class.
func (w *Workload) mine(id int64) bool { return id%w.lanes == w.lane }

// Resume continues the workload over data an earlier run left (a durable
// upstream reopened): product and event ids continue above the highest
// stored ones, updates and deletes pick from the stored products, and the
// DDL cycle continues from the current columns (promo present: the next
// DDL drops it). ts is the snapshot to read (a fresh TSO ts).
func (w *Workload) Resume(ctx context.Context, srv *sqlfront.Server, ts uint64) error {
	return ResumeLanes(ctx, srv, ts, []*Workload{w})
}

// ResumeLanes resumes every lane of a concurrent workload (SetLane) from
// one read of the tables at ts.
func ResumeLanes(ctx context.Context, srv *sqlfront.Server, ts uint64, ws []*Workload) error {
	if !Exists(srv) {
		return nil
	}
	// The small table first: the large one may take long enough to be
	// read again at a fresh ts (readResolving).
	events, err := readResolving(ctx, srv, "events", ts)
	if err != nil {
		return fmt.Errorf("demo: resume: %w", err)
	}
	products, err := readResolving(ctx, srv, "products", ts)
	if err != nil {
		return fmt.Errorf("demo: resume: %w", err)
	}
	maxID, maxEv := int64(0), int64(0)
	for _, r := range products.Rows {
		maxID = max(maxID, r.Values[0].GetInt64())
	}
	for _, r := range events.Rows {
		maxEv = max(maxEv, r.Values[0].GetInt64())
	}
	promo := false
	for _, c := range products.Table.Columns {
		promo = promo || c.Name.L == "promo"
	}
	for _, w := range ws {
		w.live = w.live[:0]
		for _, r := range products.Rows {
			if id := r.Values[0].GetInt64(); w.mine(id) {
				w.live = append(w.live, id)
			}
		}
		w.nextID, w.nextEv = w.align(maxID+1), w.align(maxEv+1)
		w.ddlStep = 0
		if promo {
			w.ddlStep = 1
		}
	}
	return nil
}

// Stats counts what the workload did.
type Stats struct {
	Inserts, Updates, Deletes, Events, DDLs int
}

// Step performs one transaction of the mix and reports what it did.
func (w *Workload) Step(ctx context.Context, st *Stats) error {
	w.steps++
	if w.DDLEvery > 0 && w.steps%w.DDLEvery == 0 {
		st.DDLs++
		return w.ddl(ctx)
	}
	switch p := w.rng.Intn(100); {
	case p < 40 || len(w.live) < 20:
		st.Inserts++
		return w.exec(ctx, w.insertProduct())
	case p < 70:
		st.Updates++
		id := w.live[w.rng.Intn(len(w.live))]
		return w.exec(ctx, fmt.Sprintf("UPDATE %s.products SET price = %d.%02d, stock = %d, updated_at = '%s' WHERE id = %d",
			Database, 1+w.rng.Intn(500), w.rng.Intn(100), w.rng.Intn(100), w.Now(), id))
	case p < 80:
		st.Deletes++
		i := w.rng.Intn(len(w.live))
		id := w.live[i]
		w.live[i] = w.live[len(w.live)-1]
		w.live = w.live[:len(w.live)-1]
		return w.exec(ctx, fmt.Sprintf("DELETE FROM %s.products WHERE id = %d", Database, id))
	default:
		st.Events++
		id := w.nextEv
		w.nextEv += w.lanes
		pid := w.live[w.rng.Intn(len(w.live))]
		return w.exec(ctx, fmt.Sprintf("INSERT INTO %s.events VALUES (%d, %d, '%s', '%s')",
			Database, id, pid, kinds[w.rng.Intn(len(kinds))], phrases[w.rng.Intn(len(phrases))]))
	}
}

func (w *Workload) exec(ctx context.Context, q string) error {
	if _, err := w.ss.Exec(ctx, q); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}

func (w *Workload) insertProduct() string {
	id := w.nextID
	w.nextID += w.lanes
	w.live = append(w.live, id)
	adj, noun := adjectives[w.rng.Intn(len(adjectives))], nouns[w.rng.Intn(len(nouns))]
	desc := fmt.Sprintf("A %s %s: %s, %s.", adj, noun, phrases[w.rng.Intn(len(phrases))], phrases[w.rng.Intn(len(phrases))])
	vec := make([]string, Dim)
	for i := range vec {
		vec[i] = fmt.Sprintf("%.3f", w.rng.Float64()*2-1)
	}
	return fmt.Sprintf("INSERT INTO %s.products (id, title, description, category, price, stock, attrs, embedding, updated_at) "+
		"VALUES (%d, '%s %s', '%s', '%s', %d.%02d, %d, '{\"color\": \"%s\", \"rating\": %d}', '[%s]', '%s')",
		Database, id, adj, noun, desc, categories[w.rng.Intn(len(categories))], 1+w.rng.Intn(500), w.rng.Intn(100),
		w.rng.Intn(100), adj, 1+w.rng.Intn(5), strings.Join(vec, ","), w.Now())
}

// ddl cycles through an additive and a removing schema change so the demo
// shows both kinds of schema lineage steps.
func (w *Workload) ddl(ctx context.Context) error {
	w.ddlStep++
	if w.ddlStep%2 == 1 {
		return w.exec(ctx, "ALTER TABLE "+Database+".products ADD COLUMN promo VARCHAR(64) DEFAULT 'none'")
	}
	return w.exec(ctx, "ALTER TABLE "+Database+".products DROP COLUMN promo")
}

// readResolving reads a demo table at ts as a TiDB reader would after a
// crash: a lock left by a transaction that was in flight when the previous
// process died is resolved once its TTL has passed (committed if its
// primary committed, rolled back otherwise), waiting for the TTL first, so
// a restart right after kill -9 does not fail on the dead writer's lock.
func readResolving(ctx context.Context, srv *sqlfront.Server, table string, ts uint64) (*sqlfront.TableSnapshot, error) {
	deadline := time.Now().Add(time.Minute)
	for tries := 0; ; tries++ {
		snap, err := sqlfront.ReadTable(ctx, srv.Cluster(), Database, table, ts)
		if errors.Is(err, mvcc.ErrGCTooEarly) && tries < 3 {
			// Reading a large table on a loaded machine outlasted the GC
			// life time: the ids only grow, so a fresh snapshot serves.
			if ts, err = srv.Cluster().CurrentTs(ctx); err != nil {
				return nil, err
			}
			continue
		}
		le := (*mvcc.LockedError)(nil)
		if !errors.As(err, &le) || time.Now().After(deadline) {
			return snap, err
		}
		key := le.Lock.Key
		if _, rerr := srv.Cluster().ResolveLocks(key, append(append([]byte(nil), key...), 0), ts); rerr != nil {
			return nil, fmt.Errorf("resolve lock on %x in %s.%s: %w", key, Database, table, rerr)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond): // the lock may still be alive (its TTL decides)
		}
	}
}
