package normalize

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// snapRowsOf builds n rows of intPKTable from id first.
func snapRowsOf(first, n int64) []SnapshotRow {
	out := make([]SnapshotRow, n)
	for i := range out {
		id := first + int64(i)
		out[i] = SnapshotRow{Key: tablecodec.EncodeIntRecordKey(nil, 42, id),
			Values: minicdc.ValuesOf([]value.Datum{value.NewIntDatum(id), value.NewStringDatum(fmt.Sprintf("t%d", id)), value.NewIntDatum(id * 2)})}
	}
	return out
}

// TestN41_N44_SnapshotPartition: snapshot rows are upserts at commit_ts S
// lowered as the row path lowers them (N41); chunks ingested from several
// goroutines take contiguous seqs from 1 in the snapshot's epoch, cut into
// batches by N21's bounds (N42); Finish stores progress S in that epoch
// (N43); the stream's bridge opened afterwards takes the next epoch and
// starts at S (N44).
func TestN41_N44_SnapshotPartition(t *testing.T) {
	sink := newFakeSink()
	ti := intPKTable(42, "items")
	tables := []Table{{PhysicalID: 42, SchemaID: 1, Database: "shop", Info: mt(ti)}}
	const s = 500
	boot, err := New(Config{ClientID: "a", StartTs: s, Tables: tables}, sink)
	require.NoError(t, err)
	res, err := boot.Open(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(1), res.Epoch)
	token := sink.colls["shop.items"].lineage.GetSchemaGenerationToken()

	p, err := NewSnapshotPartition(sink, SnapshotConfig{Partition: "table:42", Collection: "shop.items", Epoch: res.Epoch, Token: token,
		Ts: s, Table: mt(ti), PhysicalID: 42, MaxBatchRows: 7})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := int64(0); w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows := snapRowsOf(1+w*25, 25)
			ch, err := p.Lower(len(rows), func(i int) (SnapshotRow, error) { return rows[i], nil })
			if err == nil {
				err = p.Ingest(context.Background(), ch)
			}
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, uint64(100), p.Rows())
	muts := sink.mutationsOf("table:42")
	require.Len(t, muts, 100)
	for i, m := range muts {
		require.Equal(t, uint64(i+1), m.GetSeq(), "N42: contiguous seqs from 1")
		require.Equal(t, uint64(s), m.GetCommitTs(), "N41: commit_ts S")
		require.Equal(t, apiv1.MutationKind_MUTATION_KIND_UPSERT, m.GetKind())
	}
	for _, b := range sink.batches {
		require.Equal(t, uint64(1), b.GetSourceEpoch())
		require.LessOrEqual(t, len(b.GetMutations()), 7, "N21 bound")
	}
	// N41: the same document the row path's lowering gives.
	pk, fields, err := RowDocument(mt(ti), tablecodec.EncodeIntRecordKey(nil, 42, 30), minicdc.ValuesOf([]value.Datum{value.NewIntDatum(30), value.NewStringDatum("t30"), value.NewIntDatum(60)}))
	require.NoError(t, err)
	docs := sink.liveDocs("shop.items")
	require.Len(t, docs, 100)
	require.Equal(t, len(fields), len(docs[pk].GetFields()))
	for k, v := range fields {
		require.Truef(t, v.GetInt64Value() == docs[pk].GetFields()[k].GetInt64Value() && v.GetStringValue() == docs[pk].GetFields()[k].GetStringValue(), "field %s", k)
	}

	require.NoError(t, p.Finish(context.Background()))
	require.Equal(t, uint64(s), sink.parts["table:42"].GetResolvedTs(), "N43")
	require.Equal(t, uint64(1), sink.parts["table:42"].GetSourceEpoch())

	stream, err := New(Config{ClientID: "a", StartTs: s, Tables: tables}, sink)
	require.NoError(t, err)
	res, err = stream.Open(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(2), res.Epoch, "N44: the stream takes the next epoch")
	require.Equal(t, uint64(s), res.StartTs, "N44: the stream starts at S")
}

// TestN42_SnapshotIngestFailureIsSticky: a failed batch stops the
// partition's snapshot; later calls return the same error (N7's rule).
func TestN42_SnapshotIngestFailureIsSticky(t *testing.T) {
	sink := newFakeSink()
	ti := intPKTable(42, "items")
	boot, err := New(Config{ClientID: "a", StartTs: 9, Tables: []Table{{PhysicalID: 42, Database: "shop", Info: mt(ti)}}}, sink)
	require.NoError(t, err)
	_, err = boot.Open(context.Background())
	require.NoError(t, err)
	p, err := NewSnapshotPartition(sink, SnapshotConfig{Partition: "table:42", Collection: "shop.items", Epoch: 1,
		Token: sink.colls["shop.items"].lineage.GetSchemaGenerationToken(), Ts: 9, Table: mt(ti), PhysicalID: 42})
	require.NoError(t, err)
	sink.failIngest = 1
	rows := snapRowsOf(1, 3)
	ch, err := p.Lower(3, func(i int) (SnapshotRow, error) { return rows[i], nil })
	require.NoError(t, err)
	first := p.Ingest(context.Background(), ch)
	require.ErrorContains(t, first, "snapshot ingest table:42 epoch 1 seq 1..3")
	ch, err = p.Lower(3, func(i int) (SnapshotRow, error) { return rows[i], nil })
	require.NoError(t, err)
	require.Equal(t, first, p.Ingest(context.Background(), ch))
	require.Error(t, p.Finish(context.Background()))

	_, err = NewSnapshotPartition(sink, SnapshotConfig{Partition: "table:42", Collection: "shop.items", Epoch: 1, Token: apiv1.InitialGenerationToken, Ts: 9, Table: mt(ti)})
	require.ErrorContains(t, err, "has no generation yet")
}

// gatedSink holds each Ingest until the test lets it through, so a test
// can queue chunks behind a batch in flight.
type gatedSink struct {
	*fakeSink
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedSink) Ingest(ctx context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error) {
	g.entered <- struct{}{}
	<-g.gate
	return g.fakeSink.Ingest(ctx, b)
}

// queued is the number of built batches waiting to be sent.
func (p *SnapshotPartition) queued() int {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	return len(p.queue)
}

// snapGroupFixture is a partition over a gated sink with MaxBatchRows 10.
func snapGroupFixture(t *testing.T) (*gatedSink, *SnapshotPartition) {
	t.Helper()
	sink := &gatedSink{fakeSink: newFakeSink(), entered: make(chan struct{}), gate: make(chan struct{})}
	ti := intPKTable(42, "items")
	boot, err := New(Config{ClientID: "a", StartTs: 9, Tables: []Table{{PhysicalID: 42, Database: "shop", Info: mt(ti)}}}, sink.fakeSink)
	require.NoError(t, err)
	_, err = boot.Open(context.Background())
	require.NoError(t, err)
	p, err := NewSnapshotPartition(sink, SnapshotConfig{Partition: "table:42", Collection: "shop.items", Epoch: 1,
		Token: sink.colls["shop.items"].lineage.GetSchemaGenerationToken(), Ts: 9, Table: mt(ti), PhysicalID: 42, MaxBatchRows: 10})
	require.NoError(t, err)
	return sink, p
}

// ingestAsync lowers rows [first, first+n) and ingests them on a new
// goroutine; the result arrives on the returned channel.
func ingestAsync(p *SnapshotPartition, first, n int64) <-chan error {
	out := make(chan error, 1)
	go func() {
		rows := snapRowsOf(first, n)
		ch, err := p.Lower(len(rows), func(i int) (SnapshotRow, error) { return rows[i], nil })
		if err == nil {
			err = p.Ingest(context.Background(), ch)
		}
		out <- err
	}()
	return out
}

// releaseAll lets every Ingest through until stop is called.
func releaseAll(g *gatedSink) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-g.entered:
				g.gate <- struct{}{}
			case <-quit:
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}

// waitQueued waits until n built batches wait behind the one in flight.
func waitQueued(p *SnapshotPartition, n int) {
	for p.queued() < n {
		runtime.Gosched()
	}
}

// TestN46_SnapshotGroupCommit: chunks of a partition that wait while a
// batch is in flight are sent together, in arrival order, as few batches
// as N21's bounds allow, with contiguous seqs; each call returns once its
// rows were acknowledged.
func TestN46_SnapshotGroupCommit(t *testing.T) {
	sink, p := snapGroupFixture(t)
	a := ingestAsync(p, 1, 3)
	<-sink.entered // A's batch is in flight
	b := ingestAsync(p, 4, 3)
	waitQueued(p, 1)
	c := ingestAsync(p, 7, 3)
	waitQueued(p, 2)
	d := ingestAsync(p, 10, 5) // 3+3+5 > 10 rows: a batch of its own
	waitQueued(p, 3)
	sink.gate <- struct{}{}
	require.NoError(t, <-a)
	stop := releaseAll(sink)
	defer stop()
	require.NoError(t, <-b)
	require.NoError(t, <-c)
	require.NoError(t, <-d)
	require.Equal(t, 3, len(sink.batches), "N46: B and C sent as one batch, D alone (N21 bound of 10 rows)")
	var ids [][]string
	for _, bt := range sink.batches {
		var pks []string
		for _, m := range bt.GetMutations() {
			pks = append(pks, m.GetPrimaryKey())
		}
		ids = append(ids, pks)
	}
	require.Equal(t, []int{3, 6, 5}, []int{len(ids[0]), len(ids[1]), len(ids[2])})
	require.Equal(t, []uint64{1, 4, 10}, []uint64{sink.batches[0].GetFirstSeq(), sink.batches[1].GetFirstSeq(), sink.batches[2].GetFirstSeq()})
	for i, m := range sink.mutationsOf("table:42") {
		require.Equal(t, uint64(i+1), m.GetSeq(), "N42: contiguous seqs from 1")
	}
	// Arrival order inside the merged batch: B's rows, then C's.
	pkB, _, err := RowDocument(mt(intPKTable(42, "items")), tablecodec.EncodeIntRecordKey(nil, 42, 4), snapRowsOf(4, 1)[0].Values)
	require.NoError(t, err)
	pkC, _, err := RowDocument(mt(intPKTable(42, "items")), tablecodec.EncodeIntRecordKey(nil, 42, 7), snapRowsOf(7, 1)[0].Values)
	require.NoError(t, err)
	require.Equal(t, pkB, ids[1][0])
	require.Equal(t, pkC, ids[1][3])
	require.Equal(t, uint64(14), p.Rows())
}

// TestN46_SnapshotGroupFailureReachesEveryWaiter: a merged batch that
// fails fails every call whose rows it held, and every later call (N42).
func TestN46_SnapshotGroupFailureReachesEveryWaiter(t *testing.T) {
	sink, p := snapGroupFixture(t)
	a := ingestAsync(p, 1, 3)
	<-sink.entered
	b := ingestAsync(p, 4, 3)
	waitQueued(p, 1)
	c := ingestAsync(p, 7, 3)
	waitQueued(p, 2)
	sink.gate <- struct{}{}
	require.NoError(t, <-a)
	<-sink.entered // the merged batch of B and C
	sink.mu.Lock()
	sink.failIngest = 1
	sink.mu.Unlock()
	sink.gate <- struct{}{}
	errB, errC := <-b, <-c
	require.ErrorContains(t, errB, "snapshot ingest table:42 epoch 1 seq 4..9")
	require.Equal(t, errB, errC)
	require.Len(t, sink.batches, 2)
	rows := snapRowsOf(20, 1)
	ch, err := p.Lower(1, func(i int) (SnapshotRow, error) { return rows[i], nil })
	require.NoError(t, err)
	require.Equal(t, errB, p.Ingest(context.Background(), ch))
}
