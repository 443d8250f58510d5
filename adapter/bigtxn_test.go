package adapter

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/emulator"
	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
	"github.com/searchfabric/sfemu/verify"
)

var bulkTables = []TableRef{{DB: "shop", Table: "bulk"}, {DB: "shop", Table: "events"}}

// bigTxnRig is the in-process pipeline with a small memory quota: the
// embedded upstream, an emulator and an adapter over a data dir.
type bigTxnRig struct {
	ctx  context.Context
	up   *Upstream
	emu  *emulator.Emulator
	dir  string
	mem  Memory
	a    *Adapter
	cols map[string]int64
	tid  int64
}

func newBigTxnRig(t testing.TB, quota int64) *bigTxnRig {
	t.Helper()
	r := &bigTxnRig{ctx: context.Background(), dir: t.TempDir()}
	up, err := NewUpstream(r.ctx, UpstreamConfig{Seed: 3, RealClock: true, ResolvedTsInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	r.up = up
	ss := up.SQL.NewSession("")
	for _, q := range []string{
		"CREATE DATABASE shop",
		"CREATE TABLE shop.bulk (id BIGINT PRIMARY KEY, v INT, note VARCHAR(32), body TEXT)",
		"CREATE TABLE shop.events (id BIGINT PRIMARY KEY, product_id BIGINT, kind VARCHAR(16)) PARTITION BY HASH (id) PARTITIONS 4",
	} {
		if _, err := ss.Exec(r.ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	ti, _, err := up.SQL.TableInfo("shop", "bulk")
	if err != nil {
		t.Fatal(err)
	}
	r.tid, r.cols = ti.ID, map[string]int64{}
	for _, c := range ti.Columns {
		r.cols[c.Name.L] = c.ID
	}
	if r.emu, err = emulator.Open(filepath.Join(r.dir, "emulator"), emulator.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.emu.Close() })
	if r.mem, err = NewMemory(quota, -1, r.dir); err != nil {
		t.Fatal(err)
	}
	r.start(t)
	return r
}

func (r *bigTxnRig) start(t testing.TB) {
	t.Helper()
	a, err := Start(r.ctx, r.up, r.emu, Config{DataDir: r.dir, Tables: bulkTables, Memory: r.mem})
	if err != nil {
		t.Fatal(err)
	}
	r.a = a
	t.Cleanup(func() { _ = a.Close() })
}

func (r *bigTxnRig) exec(t testing.TB, q string) uint64 {
	t.Helper()
	res, err := r.up.SQL.NewSession("").Exec(r.ctx, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return res.CommitTs
}

// bigTxn writes rows [from, from+n) of shop.bulk in one transaction through
// the typed Txn API, with a body of bodyLen bytes each; between its
// prewrite and its commit, small transactions commit on both tables.
func (r *bigTxnRig) bigTxn(t testing.TB, from, n int64, bodyLen int) uint64 {
	t.Helper()
	return r.finishBigTxn(t, from, r.buildBigTxn(t, from, n, bodyLen))
}

// buildBigTxn buffers the rows of bigTxn in an upstream transaction
// without prewriting them: nothing reaches the adapter yet.
func (r *bigTxnRig) buildBigTxn(t testing.TB, from, n int64, bodyLen int) *fakeupstream.Txn {
	t.Helper()
	txn := r.up.Cluster.Begin()
	body := make([]byte, bodyLen)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	ids := []int64{r.cols["v"], r.cols["note"], r.cols["body"]}
	var val []byte
	for i := from; i < from+n; i++ {
		var err error
		val, err = rowcodec.EncodeV2(val[:0], ids, []value.Datum{value.NewIntDatum(i), value.NewStringDatum(fmt.Sprintf("n%d", i)), value.NewStringDatum(string(body))}, nil)
		if err != nil {
			t.Fatal(err)
		}
		key := tablecodec.EncodeIntRecordKey(nil, r.tid, i)
		if i == from {
			txn.SetPrimary(key)
		}
		txn.Set(key, val)
	}
	return txn
}

// finishBigTxn prewrites a transaction buildBigTxn made, commits the
// interleaved small transactions, then commits it and returns its ts.
func (r *bigTxnRig) finishBigTxn(t testing.TB, from int64, txn *fakeupstream.Txn) uint64 {
	t.Helper()
	if err := txn.Prewrite(); err != nil {
		t.Fatal(err)
	}
	// Interleaved small transactions, on the same table and the other.
	for k := int64(0); k < 5; k++ {
		r.exec(t, fmt.Sprintf("INSERT INTO shop.bulk VALUES (%d, 1, 'small', 'x')", -1-from-k))
		r.exec(t, fmt.Sprintf("INSERT INTO shop.events VALUES (%d, %d, 'view')", from+k, k))
	}
	ts, err := txn.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func (r *bigTxnRig) waitConsistent(t *testing.T, tables []TableRef, limit time.Duration) uint64 {
	t.Helper()
	final, err := r.up.Cluster.CurrentTs(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	w0 := time.Now()
	if err := verify.WaitSafe(r.ctx, r.emu, tables, final, limit); err != nil {
		t.Fatalf("%v (runtime: %v)", err, r.a.RT.Err())
	}
	t.Logf("safe after %s", time.Since(w0))
	expectConsistent(t, r.ctx, r.up, r.emu, tables, final)
	return final
}

func (r *bigTxnRig) spillRuns() (runs uint64) {
	for _, st := range r.a.Bridge.Stats() {
		runs += st.SpillRuns
	}
	return runs
}

// TestRS_BigTransactionSpillsThroughThePipeline (RS1-RS4, N40, issue 15):
// one large transaction through puller, reorder, normalize and the
// emulator with a memory quota several times smaller than the rows it
// holds, small transactions on the same and the other table while it is
// open, and a DDL right after its commit. Every row arrives once (the
// collection equals the table at the final ts), the quota was never
// passed, the transaction spilled, and its spill files are gone
// afterwards. By default 100k rows within 8 MiB (the rows/quota ratio of
// 1M rows within 64 MiB, at a tenth of the time: make test runs it on 2
// shared cores); SFEMU_BIGTXN_ROWS=1000000 SFEMU_BIGTXN_QUOTA_MIB=64 runs
// the size.
func TestRS_BigTransactionSpillsThroughThePipeline(t *testing.T) {
	rows, quota := int64(100_000), int64(8<<20)
	if n := os.Getenv("SFEMU_BIGTXN_ROWS"); n != "" {
		fmt.Sscan(n, &rows)
	}
	if n := os.Getenv("SFEMU_BIGTXN_QUOTA_MIB"); n != "" {
		fmt.Sscan(n, &quota)
		quota <<= 20
	}
	r := newBigTxnRig(t, quota)
	r.exec(t, "INSERT INTO shop.bulk VALUES (0, 0, 'first', 'x')")
	start := time.Now()
	r.bigTxn(t, 1, rows, 8)
	t.Logf("committed in %s", time.Since(start))
	r.exec(t, "ALTER TABLE shop.bulk ADD COLUMN tag VARCHAR(16) DEFAULT 'none'")
	r.exec(t, "INSERT INTO shop.bulk (id, v, note, body, tag) VALUES (-100, 2, 'after', 'y', 't')")
	r.waitConsistent(t, bulkTables, 5*time.Minute)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("%d rows in %s (%.0f rows/s); quota peak %d MiB of %d; spill runs %d; heap %d MiB",
		rows, time.Since(start), float64(rows)/time.Since(start).Seconds(), r.mem.Quota.Peak()>>20, quota>>20, r.spillRuns(), ms.HeapAlloc>>20)
	if r.mem.Quota.Peak() > quota {
		t.Fatalf("quota passed: peak %d", r.mem.Quota.Peak())
	}
	if r.spillRuns() == 0 {
		t.Fatal("the transaction did not spill")
	}
	// LP14: the prewrites held for its commit spilled too.
	if _, runs := r.a.MatcherSpill(); runs == 0 {
		t.Fatal("the matcher did not spill the transaction's prewrites")
	}
	ents, err := os.ReadDir(SpillDir(r.dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Fatalf("%d spill files left after the acknowledgement", len(ents))
	}
}
