package adapter

// The snapshot's writer: each chunk read at S is decoded by the mounter
// with the table's schema at S (the stream's decoder, SN9) and ingested
// through normalize's snapshot path into the table's own partition (N41-N44).

import (
	"context"
	"fmt"
	"sync"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/mounter"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// snapWriter implements snapshot.Writer over the state's tables (same
// order as tables).
type snapWriter struct {
	sink   normalize.Sink
	tables []snapTable
	parts  []*normalize.SnapshotPartition
	ts     uint64
	pool   sync.Pool // *decodeScratch
}

type decodeScratch struct {
	m  *mounter.Mounter
	rc mounter.RowChange
	ds []value.Datum
}

// newSnapWriter builds one snapshot partition per physical table, in the
// collection each is mapped to (its current generation token), in epoch.
func newSnapWriter(ctx context.Context, sink normalize.Sink, bcfg normalize.Config, tables []snapTable, ts, epoch uint64) (*snapWriter, error) {
	list, err := sink.ListCollections(ctx, &apiv1.ListCollectionsRequest{})
	if err != nil {
		return nil, fmt.Errorf("adapter: snapshot: listing collections: %w", err)
	}
	byPart := map[string]*apiv1.CollectionStatus{}
	for _, st := range list.GetCollections() {
		if st.GetState() == apiv1.CollectionState_COLLECTION_STATE_DROPPED {
			continue
		}
		for _, pn := range st.GetDefinition().GetSourcePartitions() {
			byPart[pn] = st
		}
	}
	w := &snapWriter{sink: sink, tables: tables, ts: ts}
	w.pool.New = func() any { return &decodeScratch{m: mounter.New(mounter.Config{})} }
	for _, t := range tables {
		pn := normalize.PartitionName(bcfg.KeyspaceID, t.table.PhysicalID)
		st := byPart[pn]
		if st == nil {
			return nil, fmt.Errorf("adapter: snapshot of %s: no collection maps partition %s", t.name, pn)
		}
		coll := st.GetDefinition().GetName()
		p, err := normalize.NewSnapshotPartition(sink, normalize.SnapshotConfig{
			Partition: pn, Collection: coll, Epoch: epoch, Token: st.GetLineage().GetSchemaGenerationToken(), Ts: ts,
			Table: t.table.Info, PhysicalID: t.table.PhysicalID, Roles: bcfg.Roles[coll],
			MaxBatchRows: bcfg.MaxBatchRows, MaxBatchBytes: bcfg.MaxBatchBytes,
		})
		if err != nil {
			return nil, err
		}
		w.parts = append(w.parts, p)
	}
	return w, nil
}

// WriteChunk decodes kvs with the table's schema at S and ingests them.
func (w *snapWriter) WriteChunk(ctx context.Context, ti int, kvs []kvevent.KV) error {
	t := w.tables[ti]
	sc := w.pool.Get().(*decodeScratch)
	defer w.pool.Put(sc)
	ch, err := w.parts[ti].Lower(len(kvs), func(i int) (normalize.SnapshotRow, error) {
		return sc.decode(t.info, kvs[i], w.ts)
	})
	if err != nil {
		return err
	}
	return w.parts[ti].Ingest(ctx, ch)
}

func (sc *decodeScratch) decode(ti *model.TableInfo, kv kvevent.KV, ts uint64) (normalize.SnapshotRow, error) {
	entry := kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: kv.Key, Value: kv.Value, CRTs: ts}
	if err := sc.m.Decode(&entry, ti, &sc.rc); err != nil {
		return normalize.SnapshotRow{Key: kv.Key}, err
	}
	ds, err := sc.rc.Row.Datums(sc.ds[:0])
	if err != nil {
		return normalize.SnapshotRow{Key: kv.Key}, err
	}
	sc.ds = ds
	return normalize.SnapshotRow{Key: kv.Key, Values: minicdc.ValuesOf(ds)}, nil
}

// FinishTable stores the partition's progress at S; a partition that had
// no row at S stores nothing (N43): the stream's bridge starts it at S.
func (w *snapWriter) FinishTable(ctx context.Context, ti int, rows uint64) error {
	if rows == 0 {
		return nil
	}
	return w.parts[ti].Finish(ctx)
}
