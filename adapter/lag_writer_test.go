package adapter

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// kvWriter inserts rows of a benchShape table straight through the
// embedded cluster's transactions, for the lag benchmarks: at 20k rows/s
// the SQL front's parse and evaluation alone take most of a core under
// load, so the writer, not the pipeline, set the rate. It writes what the
// SQL front writes for the same multi-row INSERT (the record key of the
// integer handle and the row in format v2 from the same encoder, checked
// byte for byte by TestLagWriterMatchesSQLFront) and commits it the same
// way (one 2PC transaction per statement, durability deferred like an
// auto-commit statement), so the CDC feed, the puller and everything
// after them see the same changes; only SQL parsing is left out, which is
// not part of the path being measured.
type kvWriter struct {
	c     *fakeupstream.Cluster
	shape benchShape
	phys  int64
	ids   []int64 // column ids of title, price, stock[, emb]
	enc   rowcodec.Encoder
	ds    []value.Datum
	title []byte
	vec   []byte
}

// newKVWriter looks up db.table (a benchShape table) in the SQL front's
// catalog.
func newKVWriter(up *Upstream, db, table string, shape benchShape) (*kvWriter, error) {
	ti, _, err := up.SQL.TableInfo(db, table)
	if err != nil {
		return nil, err
	}
	if !ti.PKIsHandle {
		return nil, fmt.Errorf("kv writer: %s.%s has no integer handle", db, table)
	}
	w := &kvWriter{c: up.Cluster, shape: shape, phys: ti.ID}
	want := []string{"title", "price", "stock"}
	if shape.all {
		want = append(want, "emb")
	}
	for _, name := range want {
		c := findColumn(ti, name)
		if c == nil {
			return nil, fmt.Errorf("kv writer: %s.%s has no column %q", db, table, name)
		}
		w.ids = append(w.ids, c.ID)
	}
	return w, nil
}

func findColumn(ti *model.TableInfo, name string) *model.ColumnInfo {
	for _, c := range ti.Columns {
		if strings.EqualFold(c.Name.O, name) {
			return c
		}
	}
	return nil
}

// insert writes rows from+1 .. from+n in one transaction (the values
// benchShape.row gives them) and returns its commit ts.
func (w *kvWriter) insert(from, n int) (uint64, error) {
	txn := w.c.Begin()
	for id := from + 1; id <= from+n; id++ {
		key, val, err := w.encode(id)
		if err != nil {
			_ = txn.Discard()
			return 0, err
		}
		txn.Set(key, val)
	}
	txn.DeferDurability()
	ts, err := txn.Commit()
	if err != nil {
		return 0, err
	}
	return ts, txn.WaitDurable()
}

// encode is row id as the SQL front encodes the literal row of
// benchShape.row.
func (w *kvWriter) encode(id int) (key, val []byte, err error) {
	w.title = fmt.Appendf(w.title[:0], "item number %d", id)
	w.ds = append(w.ds[:0], value.NewStringDatumBytes(w.title), value.NewIntDatum(int64(id%1000)), value.NewIntDatum(int64(id%50)))
	if w.shape.all {
		a, b, c, d := benchVector(id)
		w.vec, err = value.AppendVectorFloat32(w.vec[:0], []float32{float32(a), float32(b), float32(c), float32(d)})
		if err != nil {
			return nil, nil, err
		}
		w.ds = append(w.ds, value.NewVectorFloat32Datum(w.vec))
	}
	val, err = w.enc.EncodeV2(nil, w.ids, w.ds, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("kv writer: encode row %d: %w", id, err)
	}
	return tablecodec.EncodeRecordKey(nil, w.phys, tablecodec.NewIntHandle(int64(id))), val, nil
}

// TestLagWriterMatchesSQLFront: the lag benchmarks' writer stores the same
// bytes as the SQL front for the same rows (both shapes), so what it
// measures is what a SQL writer would make the pipeline do.
func TestLagWriterMatchesSQLFront(t *testing.T) {
	ctx := context.Background()
	up, err := NewUpstream(ctx, UpstreamConfig{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	ss := up.SQL.NewSession("")
	for _, shape := range []benchShape{{}, {all: true}} {
		for _, q := range []string{"DROP DATABASE IF EXISTS bench", "DROP DATABASE IF EXISTS kv", "CREATE DATABASE bench", "CREATE DATABASE kv",
			shape.createTable(), strings.Replace(shape.createTable(), "bench.", "kv.", 1)} {
			if _, err := ss.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		const n = 300
		var sb strings.Builder
		sb.WriteString("INSERT INTO bench.items VALUES ")
		for id := 1; id <= n; id++ {
			if id > 1 {
				sb.WriteByte(',')
			}
			shape.row(&sb, id)
		}
		res, err := ss.Exec(ctx, sb.String())
		if err != nil {
			t.Fatal(err)
		}
		w, err := newKVWriter(up, "kv", "items", shape)
		if err != nil {
			t.Fatal(err)
		}
		kvTs, err := w.insert(0, n)
		if err != nil {
			t.Fatal(err)
		}
		sqlTi, _, err := up.SQL.TableInfo("bench", "items")
		if err != nil {
			t.Fatal(err)
		}
		for id := 1; id <= n; id++ {
			h := tablecodec.NewIntHandle(int64(id))
			want, err := up.Cluster.Get(ctx, tablecodec.EncodeRecordKey(nil, sqlTi.ID, h), res.CommitTs)
			if err != nil {
				t.Fatal(err)
			}
			got, err := up.Cluster.Get(ctx, tablecodec.EncodeRecordKey(nil, w.phys, h), kvTs)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 || !bytes.Equal(got, want) {
				t.Fatalf("all=%v row %d: kv writer stored %x, the SQL front %x", shape.all, id, got, want)
			}
		}
	}
}
