package adapter

// The snapshot's view of the table set: every configured table read from
// the meta keys at S (in every mode, so the rows read at S and the schema
// they are decoded with agree, SN9), and each physical table's record span
// split at the region boundaries (SN2).

import (
	"context"
	"fmt"

	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/snapshot"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/schemastore"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// snapTable is one physical table of the snapshot with its schema at S.
type snapTable struct {
	table normalize.Table
	info  *model.TableInfo
	name  string // db.table
}

// resolveTablesAt reads refs' schemas at ts from the meta keys.
func resolveTablesAt(ctx context.Context, up *Upstream, refs []TableRef, ts uint64) ([]snapTable, error) {
	var out []snapTable
	for _, ref := range refs {
		ti, dbID, err := schemastore.LookupTable(ctx, up.Snapshot(), ts, ref.DB, ref.Table)
		if err != nil {
			return nil, fmt.Errorf("adapter: snapshot: table %s at ts %d: %w", ref, ts, err)
		}
		info := minicdc.NewTableInfo(ti)
		for _, phys := range ti.PhysicalIDs() {
			out = append(out, snapTable{
				table: normalize.Table{PhysicalID: phys, SchemaID: dbID, Database: ref.DB, Info: info, Collection: ref.Collection},
				info:  ti, name: ref.String(),
			})
		}
	}
	return out, nil
}

// recordRange is the raw key range of a physical table's rows.
func recordRange(phys int64) (start, end []byte) {
	start = tablecodec.EncodeRecordPrefix(nil, phys)
	return start, tablecodec.PrefixNext(start)
}

// planRanges splits phys's record range at the region boundaries the
// upstream reports now.
func planRanges(ctx context.Context, up *Upstream, phys int64) ([]snapshot.Range, error) {
	start, end := recordRange(phys)
	bounds, err := regionBounds(ctx, up, start, end)
	if err != nil {
		return nil, fmt.Errorf("adapter: snapshot: regions of physical table %d: %w", phys, err)
	}
	return snapshot.SplitSpan(start, end, bounds)
}

// planSplitRanges is planRanges with the ranges split by keys at ts when
// they are fewer than the snapshot's concurrency (0: the default), so
// every worker has a part to read (SN14).
func planSplitRanges(ctx context.Context, up *Upstream, phys int64, ts uint64, concurrency int) ([]snapshot.Range, error) {
	rs, err := planRanges(ctx, up, phys)
	if err != nil {
		return nil, err
	}
	if concurrency <= 0 {
		concurrency = snapshot.DefaultConcurrency
	}
	rs, err = snapshot.SplitRanges(ctx, up.Snapshot(), ts, rs, concurrency)
	if err != nil {
		return nil, fmt.Errorf("adapter: snapshot: splitting the ranges of physical table %d at ts %d: %w", phys, ts, err)
	}
	return rs, nil
}

// regionBounds lists the raw start keys of the regions overlapping the raw
// range [start, end): from PD's region cache over gRPC, from the embedded
// cluster's topology in process. Region keys are comparable
// (EncodeBytes) keys; a boundary that does not decode to a raw key (not
// a TiDB split point) is left out, as the range around it still covers it.
func regionBounds(ctx context.Context, up *Upstream, start, end []byte) ([][]byte, error) {
	span := kvevent.Span{StartKey: codec.EncodeBytes(nil, start), EndKey: codec.EncodeBytes(nil, end)}
	var keys [][]byte
	if up.PD != nil {
		cur := span.StartKey
		for {
			regs, err := up.PD.Locator.LocateSpan(ctx, kvevent.Span{StartKey: cur, EndKey: span.EndKey})
			if err != nil {
				return nil, err
			}
			if len(regs) == 0 {
				break
			}
			for _, r := range regs {
				keys = append(keys, r.StartKey)
			}
			last := regs[len(regs)-1].EndKey
			if len(last) == 0 || string(last) >= string(span.EndKey) || string(last) <= string(cur) {
				break
			}
			cur = last
		}
	} else {
		for _, r := range up.Cluster.RegionsInSpan(span) {
			keys = append(keys, r.StartKey)
		}
	}
	var out [][]byte
	for _, k := range keys {
		if len(k) == 0 {
			continue
		}
		rest, raw, err := codec.DecodeBytes(k, nil)
		if err != nil || len(rest) != 0 {
			continue
		}
		out = append(out, raw)
	}
	return out, nil
}
