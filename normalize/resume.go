package normalize

import (
	"context"
	"fmt"
	"sort"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// Resume is where a restarted adapter starts (N31) and the epoch it uses
// (N4).
type Resume struct {
	// StartTs is the Mini-CDC start ts: every change above it is
	// redelivered, every change at or below it is acknowledged data.
	StartTs uint64
	// Epoch is the source_epoch of this run.
	Epoch uint64
	// Stored is the emulator's stored state of the partitions, by name.
	Stored map[string]*apiv1.PartitionState
}

// ResumePoint reads the stored progress of partitions from the emulator and
// returns the resume ts (min stored resolved ts; a partition without stored
// progress contributes defaultStart) and the next epoch (max stored epoch +
// 1, or 1 when nothing is stored).
func ResumePoint(ctx context.Context, sink Sink, partitions []string, defaultStart uint64) (Resume, error) {
	if len(partitions) == 0 {
		// An empty start set (specs/tableset.md LT8): nothing stored to
		// resume from; the tables that join later are new partitions.
		return Resume{StartTs: defaultStart, Epoch: 1, Stored: map[string]*apiv1.PartitionState{}}, nil
	}
	want := append([]string(nil), partitions...)
	sort.Strings(want)
	resp, err := sink.GetProgress(ctx, &apiv1.GetProgressRequest{SourcePartitions: want})
	if err != nil {
		return Resume{}, fmt.Errorf("normalize: reading stored progress: %w", err)
	}
	r := Resume{Stored: map[string]*apiv1.PartitionState{}}
	wanted := map[string]bool{}
	for _, p := range want {
		wanted[p] = true
	}
	var maxEpoch uint64
	for _, st := range resp.GetPartitions() {
		if !wanted[st.GetSourcePartition()] {
			continue // the filter is advisory; ignore extras
		}
		r.Stored[st.GetSourcePartition()] = st
		maxEpoch = max(maxEpoch, st.GetSourceEpoch())
	}
	r.Epoch = maxEpoch + 1
	first := true
	for _, p := range want {
		ts := defaultStart
		if st, ok := r.Stored[p]; ok && st.GetResolvedTs() > 0 {
			ts = st.GetResolvedTs()
		}
		if first || ts < r.StartTs {
			r.StartTs, first = ts, false
		}
	}
	return r, nil
}
