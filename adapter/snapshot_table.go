package adapter

// One table's snapshot on its own, for a table added to a running
// adapter (issue 17's live table set): the same plan, reader, decoder
// and ingest as the startup snapshot, without the startup's state file.

import (
	"context"
	"fmt"

	"github.com/searchfabric/sfemu/memquota"
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/snapshot"
)

// SnapshotTableOptions tunes SnapshotTable.
type SnapshotTableOptions struct {
	// Bridge supplies KeyspaceID, Roles, CollectionName and the batch
	// bounds, as the running bridge's config.
	Bridge normalize.Config
	// Concurrency and ChunkRows as in SnapshotConfig (defaults 4, 2048).
	Concurrency, ChunkRows int
	// Quota bounds the chunks held at once (the adapter's memory quota).
	Quota *memquota.Quota
	// Progress receives the table's counters (nil: none).
	Progress *snapshot.Progress
}

// SnapshotTable reads every physical table of ref at ts (schema read at ts
// from the meta keys) and ingests the rows into the collection that maps
// each partition, at commit_ts ts in epoch (N41, N42); each partition
// that had rows stores progress ts in epoch (N43). It returns the number
// of rows ingested.
//
// The caller must first hold GC at ts (the scans read at it), have the
// collection mapping the partitions with a generation (a schema request),
// and pick an epoch above the partitions' stored one that the partitions'
// stream will not reuse: the stream's bridge then opens with the next
// epoch (N4) and starts at ts. A stop in the middle leaves no state: run
// it again (the same rows are upserted again at the same ts, E38).
func SnapshotTable(ctx context.Context, up *Upstream, sink normalize.Sink, ref TableRef, ts, epoch uint64, opts SnapshotTableOptions) (uint64, error) {
	if ts == 0 || epoch == 0 {
		return 0, fmt.Errorf("adapter: snapshot of %s: ts %d and epoch %d must be > 0", ref, ts, epoch)
	}
	tables, err := resolveTablesAt(ctx, up, []TableRef{ref}, ts)
	if err != nil {
		return 0, err
	}
	st := &snapshot.State{Version: snapshot.StateVersion, Ts: ts, Epoch: epoch}
	nameOf := opts.Bridge.CollectionName
	if nameOf == nil {
		nameOf = normalize.DefaultCollectionName
	}
	for _, t := range tables {
		rs, err := planSplitRanges(ctx, up, t.table.PhysicalID, ts, opts.Concurrency)
		if err != nil {
			return 0, err
		}
		coll := ref.Collection
		if coll == "" {
			coll = nameOf(t.table.Database, t.table.Info.Name.L)
		}
		st.Tables = append(st.Tables, snapshot.Table{Name: t.name, Collection: coll, PhysicalID: t.table.PhysicalID, Ranges: rs})
	}
	w, err := newSnapWriter(ctx, sink, opts.Bridge, tables, ts, epoch)
	if err != nil {
		return 0, err
	}
	if err := snapshot.Run(ctx, st, snapshot.Config{Reader: up.Snapshot(), Writer: w, Concurrency: opts.Concurrency, ChunkRows: opts.ChunkRows,
		Quota: opts.Quota, Progress: opts.Progress}); err != nil {
		return 0, fmt.Errorf("adapter: snapshot of %s at ts %d: %w", ref, ts, err)
	}
	var rows uint64
	for _, t := range st.Tables {
		rows += t.Rows()
	}
	return rows, nil
}
