package main

// The lines `sfemu run` prints: the mode, the running line and the
// periodic status line.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/minicdc"
)

func modeLine(up *adapter.Upstream) string {
	pdAddr := "none"
	if addrs := up.PDAddrs(); len(addrs) > 0 {
		pdAddr = strings.Join(addrs, ",")
	}
	return fmt.Sprintf("mode=%s pd=%s", up.Mode(), pdAddr)
}

// stateWords end the running line: "state=new", or "state=resumed" with
// what the embedded upstream restored (the adapter's resume ts and epoch
// are on the line already).
func stateWords(restored *fakeupstream.RestoreStats, a *adapter.Adapter) string {
	switch {
	case restored != nil && restored.Records > 0:
		return fmt.Sprintf("state=resumed upstream_records=%d upstream_bytes=%d upstream_torn_bytes=%d tso_above=%d",
			restored.Records, restored.Size, restored.TornBytes, restored.TSOLimit)
	case restored == nil && len(a.Resume.Stored) > 0:
		return "state=resumed"
	default:
		return "state=new"
	}
}

func refNames(tables []adapter.TableRef) string {
	var names []string
	for _, t := range tables {
		names = append(names, t.String())
	}
	return strings.Join(names, ",")
}

func collectionNames(tables []adapter.TableRef) string {
	var names []string
	for _, t := range tables {
		names = append(names, t.CollectionName())
	}
	return strings.Join(names, ",")
}

// collectionWords is a collection's part of the status line: its safe_ts
// lag behind now, with the rebuild in flight (E58) as such, and never a
// lag measured from a safe_ts that is not defined yet (E56).
func collectionWords(c *apiv1.CollectionStatus, now uint64) string {
	var w string
	switch safe := c.GetSafeTs(); {
	case safe == 0:
		w = "safe_ts=none"
	default:
		lag := time.Duration(max(0, int64(now>>18)-int64(safe>>18))) * time.Millisecond
		w = fmt.Sprintf("safe_ts_lag=%v", lag)
	}
	if rb := c.GetRebuild(); rb != nil {
		w += fmt.Sprintf(" rebuilding gen=%d %d%% serving=%d", rb.GetGeneration(), rb.GetPercent(), rb.GetServingGeneration())
	}
	return w
}

// statusLine: rows/s since the last line, rows buffered in the reorder
// buffers, DDLs so far, the last checkpoint, and per collection how far
// safe_ts trails the upstream's current ts.
func statusLine(ctx context.Context, up *adapter.Upstream, emu *emulator.Emulator, mem adapter.Memory, a *adapter.Adapter, prev, cur minicdc.Stats, d time.Duration) string {
	rate := float64(cur.RowsDelivered-prev.RowsDelivered) / d.Seconds()
	var b strings.Builder
	buffered := 0
	for _, ps := range a.Bridge.Stats() {
		buffered += ps.UnsealedRows + ps.SealedRows
	}
	fmt.Fprintf(&b, "sfemu: rows/s=%.0f rows=%d buffered=%d ddls=%d checkpoint_ts=%d", rate, cur.RowsDelivered, buffered, cur.DDLsDelivered, cur.LastCheckpointTs)
	b.WriteString(memoryWords(mem, a))
	if up.Cluster != nil && up.Cluster.Durable() {
		// The embedded upstream's disk use: its log, compacted in the
		// background (specs/fakeupstream-cluster.md DUR-12).
		fmt.Fprintf(&b, " upstream_log=%.1fMiB", float64(up.Cluster.LogSize())/(1<<20))
	}
	now, err := up.CurrentTs(ctx)
	list, lerr := emu.ListCollections(ctx, &apiv1.ListCollectionsRequest{})
	if err == nil && lerr == nil {
		cols := list.GetCollections()
		sort.Slice(cols, func(i, j int) bool { return cols[i].GetDefinition().GetName() < cols[j].GetDefinition().GetName() })
		for _, c := range cols {
			fmt.Fprintf(&b, " %s(%s)", c.GetDefinition().GetName(), collectionWords(c, now))
		}
	}
	return b.String()
}
