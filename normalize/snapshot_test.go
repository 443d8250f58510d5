package normalize

import (
	"context"
	"fmt"
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
