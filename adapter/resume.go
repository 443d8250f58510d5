package adapter

// Startup phase 1, the resume point: where the runtime starts, and with
// which epoch. The normalize bridge owns it (it reads the emulator's stored
// progress); this phase picks the start ts the bridge falls back to for
// partitions without progress and opens the bridge.

import (
	"context"
	"fmt"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/normalize"
)

// resumeConfig is what the resume phase needs of Config.
type resumeConfig struct {
	// StartTs is where a partition without stored progress starts (0 =
	// the upstream's current ts, moved back to a collection creation
	// nothing recorded progress for, SR11).
	StartTs uint64
	// ClientID identifies the adapter to the emulator.
	ClientID string
	// Bridge is the bridge's config; ClientID, StartTs and Tables are
	// filled in here.
	Bridge normalize.Config
}

// resumePoint is an opened bridge and where the runtime resumes.
type resumePoint struct {
	bridge *normalize.Bridge
	resume normalize.Resume
}

// openResumePoint builds the bridge over tables and opens it: the resume
// point and epoch come from the emulator's stored progress (M48).
func openResumePoint(ctx context.Context, up *Upstream, sink normalize.Sink, cfg resumeConfig, tables []normalize.Table) (resumePoint, error) {
	now := cfg.StartTs
	if now == 0 {
		var err error
		if now, err = up.CurrentTs(ctx); err != nil {
			return resumePoint{}, err
		}
		created, err := unreportedSince(ctx, sink, cfg.Bridge, tables)
		if err != nil {
			return resumePoint{}, err
		}
		if created > 0 {
			now = min(now, created)
		}
	}
	bcfg := cfg.Bridge
	bcfg.ClientID, bcfg.StartTs, bcfg.Tables = cfg.ClientID, now, tables
	bridge, err := normalize.New(bcfg, sink)
	if err != nil {
		return resumePoint{}, err
	}
	resume, err := bridge.Open(ctx)
	if err != nil {
		return resumePoint{}, err
	}
	return resumePoint{bridge: bridge, resume: resume}, nil
}

// unreportedSince finds collections of the table set that exist but hold
// partitions without stored progress: the emulator leaves the partitions
// of a collection's creation unreported (E29) until the adapter's first
// checkpoint, so a process that stopped before it (a crash in the first
// moments of a run) left rows committed after the creation that nothing
// records. It returns the earliest such creation ts (0: none), where the
// run must start instead of now (SR11).
func unreportedSince(ctx context.Context, sink normalize.Sink, bcfg normalize.Config, tables []normalize.Table) (uint64, error) {
	nameOf := bcfg.CollectionName
	if nameOf == nil {
		nameOf = normalize.DefaultCollectionName
	}
	parts := map[string][]string{}
	var all []string
	for _, t := range tables {
		name := t.Collection
		if name == "" && t.Info != nil {
			name = nameOf(t.Database, t.Info.Name.L)
		}
		pn := normalize.PartitionName(bcfg.KeyspaceID, t.PhysicalID)
		parts[name] = append(parts[name], pn)
		all = append(all, pn)
	}
	list, err := sink.ListCollections(ctx, &apiv1.ListCollectionsRequest{})
	if err != nil {
		return 0, fmt.Errorf("adapter: listing collections: %w", err)
	}
	prog, err := sink.GetProgress(ctx, &apiv1.GetProgressRequest{SourcePartitions: all})
	if err != nil {
		return 0, fmt.Errorf("adapter: reading stored progress: %w", err)
	}
	stored := map[string]bool{}
	for _, ps := range prog.GetPartitions() {
		if ps.GetResolvedTs() > 0 {
			stored[ps.GetSourcePartition()] = true
		}
	}
	var since uint64
	for _, st := range list.GetCollections() {
		if st.GetState() == apiv1.CollectionState_COLLECTION_STATE_DROPPED {
			continue
		}
		created := st.GetLineage().GetLastDdlCommitTs()
		if created == 0 || st.GetLineage().GetLastUpdatePolicy() != apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION {
			continue
		}
		for _, pn := range parts[st.GetDefinition().GetName()] {
			if !stored[pn] {
				if since == 0 || created < since {
					since = created
				}
				break
			}
		}
	}
	return since, nil
}
