package emulator

import (
	"context"
	"fmt"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/emulator/docstore"
	"github.com/searchfabric/sfemu/emulator/storage"
)

// Ingest admits and applies one mutation batch (E32..E42). An admitted
// batch is applied atomically and is durable when Ingest returns.
//
// The emulator keeps references to the batch's Value messages: do not
// modify a batch after passing it.
func (e *Emulator) Ingest(ctx context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error) {
	return e.IngestRows(ctx, b, nil)
}

// IngestRows is Ingest of a batch whose upserts carry their values
// positionally in rows (E44) instead of in each Mutation's fields map:
// the same admission, checks, outcome and durability, without a map per
// row. rows nil is Ingest. The emulator keeps references to rows' values
// and layout: do not modify them after passing them.
func (e *Emulator) IngestRows(ctx context.Context, b *apiv1.MutationBatch, rows *contract.Rows) (*apiv1.IngestResponse, error) {
	start := e.opts.Clock.Now()
	resp, err := e.ingest(b, rows)
	if err != nil {
		return nil, e.reject("ingest", err)
	}
	outcome := "applied"
	if resp.GetOutcome() == apiv1.IngestOutcome_INGEST_OUTCOME_REPLAY_NOOP {
		outcome = "replay_noop"
	} else {
		e.metrics.mutations.WithLabelValues(resp.GetCollection(), "applied").Add(float64(resp.GetAppliedMutations()))
		e.metrics.mutations.WithLabelValues(resp.GetCollection(), "stale").Add(float64(resp.GetStaleMutations()))
		e.metrics.batchSecs.Observe(e.opts.Clock.Now().Sub(start).Seconds())
	}
	e.metrics.batches.WithLabelValues(resp.GetCollection(), outcome).Inc()
	return resp, nil
}

// mappedLocked resolves a partition to its active collection (E32).
func (e *Emulator) mappedLocked(partition, wantCollection string) (*apiv1.PartitionState, *collection, error) {
	ps := e.parts[partition]
	if ps == nil {
		return nil, nil, contract.Errf(contract.ReasonPartitionNotMapped, "source_partition", "a partition mapped to an active collection", partition, "no collection is fed by this partition")
	}
	c := e.colls[ps.GetCollection()]
	if wantCollection != "" && wantCollection != ps.GetCollection() {
		return nil, nil, contract.Errf(contract.ReasonPartitionNotMapped, "collection", ps.GetCollection(), wantCollection, "partition %s feeds another collection", partition)
	}
	return ps, c, nil
}

func (e *Emulator) ingest(b *apiv1.MutationBatch, rows *contract.Rows) (*apiv1.IngestResponse, error) {
	// Writers are serialised by wmu; they read state without mu (only
	// writers change it) and take mu only to publish, so reads are not
	// blocked by the durable commit.
	e.wmu.Lock()
	defer e.wmu.Unlock()
	if err := e.writableLocked(); err != nil {
		return nil, err
	}
	ps, c, err := e.mappedLocked(b.GetSourcePartition(), b.GetCollection())
	if err != nil {
		return nil, err
	}
	adm, err := contract.AdmitBatch(contract.Cursor{Epoch: ps.GetSourceEpoch(), LastSeq: ps.GetLastSeq()}, b)
	if err != nil {
		return nil, err
	}
	if adm == contract.Replay {
		return &apiv1.IngestResponse{Collection: c.name(), Outcome: apiv1.IngestOutcome_INGEST_OUTCOME_REPLAY_NOOP, SourceEpoch: ps.GetSourceEpoch(), LastSeq: ps.GetLastSeq()}, nil
	}
	if tok := c.rec.GetLineage().GetSchemaGenerationToken(); b.GetSchemaGenerationToken() != tok {
		return nil, contract.Errf(contract.ReasonStaleGeneration, "schema_generation_token", tok, b.GetSchemaGenerationToken(), "batch was built for another schema generation of %s", c.name())
	}
	muts := b.GetMutations()
	// E43: within the epoch that reported resolved_ts R, nothing new may
	// arrive at or below R (the adapter promised it had all of it).
	lateBound := uint64(0)
	if ps.GetResolvedEpoch() != 0 && ps.GetResolvedEpoch() == b.GetSourceEpoch() {
		lateBound = ps.GetResolvedTs()
	}
	var rs *contract.RowSchema
	var view *docstore.RowView
	if rows != nil {
		if rows.Layout == nil || rows.Len() != len(muts) || (rows.Enc != nil && rows.Vals != nil) {
			got := fmt.Sprint(rows.Len())
			if rows.Enc != nil && rows.Vals != nil {
				got = "rows in both forms"
			}
			return nil, contract.Errf(contract.ReasonInvalidBatch, "mutations", fmt.Sprintf("%d positional rows with a layout", len(muts)), got, "the batch's rows do not match its mutations")
		}
		rs = c.schema.Bind(rows.Layout.Names)
		if rows.Enc != nil {
			view = &docstore.RowView{}
		}
	}
	for i, m := range muts {
		var err error
		switch {
		case view != nil:
			// E96: the encoded row read as Values, then the same checks.
			var vals []*apiv1.Value
			if m.GetKind() == apiv1.MutationKind_MUTATION_KIND_UPSERT {
				var verr error
				if vals, verr = view.View(rows.Enc[i], len(rows.Layout.Names)); verr != nil {
					return nil, contract.Errf(contract.ReasonInvalidMutation, fmt.Sprintf("mutations[%d].fields", i), fmt.Sprintf("an encoded row of %d values", len(rows.Layout.Names)), verr.Error(), "the encoded row is malformed")
				}
			}
			err = rs.CheckRowAt(m, vals, i)
		case rs != nil:
			err = rs.CheckRowAt(m, rows.Vals[i], i)
		default:
			err = c.schema.CheckMutationAt(m, i)
		}
		if err != nil {
			return nil, err
		}
		if m.GetCommitTs() <= lateBound {
			return nil, contract.Errf(contract.ReasonLateMutation, fmt.Sprintf("mutations[%d].commit_ts", i), fmt.Sprintf("> %d", lateBound), fmt.Sprint(m.GetCommitTs()),
				"%s already reported resolved_ts %d in epoch %d", b.GetSourcePartition(), lateBound, b.GetSourceEpoch())
		}
	}
	// Plan (E38, E40).
	plan := c.docs.NewBatch(len(muts))
	for i, m := range muts {
		var err error
		switch {
		case m.GetKind() == apiv1.MutationKind_MUTATION_KIND_DELETE:
			plan.Delete(m.GetPrimaryKey(), m.GetCommitTs())
		case rows != nil && rows.Enc != nil:
			plan.UpsertEncoded(m.GetPrimaryKey(), m.GetCommitTs(), rows.Layout, rows.Enc[i], b.GetSourcePartition())
		case rows != nil:
			_, err = plan.UpsertRow(m.GetPrimaryKey(), m.GetCommitTs(), rows.Layout, rows.Vals[i], b.GetSourcePartition())
		default:
			_, err = plan.UpsertMap(m.GetPrimaryKey(), m.GetCommitTs(), c.schema.Layout, m.GetFields(), b.GetSourcePartition())
		}
		if err != nil { // the checks above admit only encodable values
			return nil, fmt.Errorf("emulator: collection %q key %q: storing the row: %w", c.name(), m.GetPrimaryKey(), err)
		}
	}
	changes := plan.Changes()
	last := b.GetFirstSeq() + uint64(len(muts)) - 1
	nps := &apiv1.PartitionState{
		SourcePartition: ps.GetSourcePartition(),
		Collection:      ps.GetCollection(),
		SourceEpoch:     b.GetSourceEpoch(),
		LastSeq:         last,
		ResolvedTs:      ps.GetResolvedTs(),
		ResolvedEpoch:   ps.GetResolvedEpoch(),
	}
	name := c.name()
	if err := e.persist(func(tx *storage.Tx) error {
		for _, ch := range changes {
			if err := tx.PutEntry(name, ch.PK, ch.New); err != nil {
				return err
			}
		}
		return tx.PutPartition(nps)
	}); err != nil {
		return nil, err
	}
	// Apply (E41).
	e.mu.Lock()
	c.docs.Commit(plan)
	e.parts[nps.GetSourcePartition()] = nps
	if c.aux != nil {
		c.aux.apply(changes)
	}
	e.mu.Unlock()
	if c.textW != nil {
		c.textW.enqueueChanges(changes)
	}
	if c.vecW != nil {
		c.vecW.enqueueChanges(changes)
	}
	return &apiv1.IngestResponse{
		Collection:       name,
		Outcome:          apiv1.IngestOutcome_INGEST_OUTCOME_APPLIED,
		SourceEpoch:      nps.GetSourceEpoch(),
		LastSeq:          last,
		AppliedMutations: uint64(plan.Applied),
		StaleMutations:   uint64(plan.Stale),
	}, nil
}

// AdvancePartition records a partition's resolved ts (E50) and advances the
// collection's watermarks (E51..E53). Tombstones that safe_ts has passed by
// the retention are collected (E39).
func (e *Emulator) AdvancePartition(ctx context.Context, p *apiv1.PartitionProgress) (*apiv1.AdvancePartitionResponse, error) {
	resp, err := e.advance(p)
	return resp, e.reject("advance_partition", err)
}

func (e *Emulator) advance(p *apiv1.PartitionProgress) (*apiv1.AdvancePartitionResponse, error) {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	if err := e.writableLocked(); err != nil {
		return nil, err
	}
	ps, c, err := e.mappedLocked(p.GetSourcePartition(), "")
	if err != nil {
		return nil, err
	}
	switch {
	case p.GetSourceEpoch() == 0:
		return nil, contract.Errf(contract.ReasonInvalidArgument, "source_epoch", ">= 1", "0", "epochs start at 1")
	case p.GetSourceEpoch() < ps.GetSourceEpoch():
		return nil, contract.Errf(contract.ReasonEpochRegression, "source_epoch", fmt.Sprintf(">= %d", ps.GetSourceEpoch()), fmt.Sprint(p.GetSourceEpoch()), "epoch went back for %s", p.GetSourcePartition())
	case p.GetResolvedTs() < ps.GetResolvedTs():
		return nil, contract.Errf(contract.ReasonProgressRegression, "resolved_ts", fmt.Sprintf(">= %d", ps.GetResolvedTs()), fmt.Sprint(p.GetResolvedTs()), "resolved ts went back for %s", p.GetSourcePartition())
	case p.GetResolvedTs() == 0:
		return nil, contract.Errf(contract.ReasonInvalidArgument, "resolved_ts", "> 0", "0", "resolved ts is required")
	}
	name := c.name()
	resp := &apiv1.AdvancePartitionResponse{Collection: name}
	if p.GetSourceEpoch() == ps.GetSourceEpoch() && p.GetResolvedTs() == ps.GetResolvedTs() {
		e.mu.RLock()
		resp.SafeTs = e.safeLocked(c)
		e.mu.RUnlock()
		return resp, nil
	}
	nps := clonePartition(ps)
	if p.GetSourceEpoch() > ps.GetSourceEpoch() {
		nps.SourceEpoch = p.GetSourceEpoch()
		nps.LastSeq = 0
	}
	nps.ResolvedTs = p.GetResolvedTs()
	nps.ResolvedEpoch = nps.GetSourceEpoch()
	if err := e.persist(func(tx *storage.Tx) error { return tx.PutPartition(nps) }); err != nil {
		return nil, err
	}

	e.mu.Lock()
	e.parts[nps.GetSourcePartition()] = nps
	for _, m := range []apiv1.Modality{apiv1.Modality_MODALITY_DOCUMENT, apiv1.Modality_MODALITY_METADATA_AUX} {
		if c.has(m) {
			if err := c.wm.Advance(contract.ModalityName(m), nps.GetSourcePartition(), nps.GetResolvedTs()); err != nil {
				// Inputs were checked above, so this is an internal
				// inconsistency: stop accepting writes (E92).
				e.broken = err
				e.mu.Unlock()
				return nil, contract.Errf(contract.ReasonInternal, "resolved_ts", "", "", "watermark: %v", err)
			}
		}
	}
	collected := e.collectTombstonesLocked(c)
	e.settleLocked(c)
	resp.SafeTs = e.safeLocked(c)
	e.bumpLocked()
	e.mu.Unlock()

	if c.textW != nil {
		c.textW.enqueueMark(nps.GetSourcePartition(), nps.GetResolvedTs())
	}
	if c.vecW != nil {
		c.vecW.enqueueMark(nps.GetSourcePartition(), nps.GetResolvedTs())
	}
	if len(collected) > 0 {
		if err := e.persist(func(tx *storage.Tx) error {
			for _, pk := range collected {
				if err := tx.DeleteEntry(name, pk); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// collectTombstonesLocked forgets the tombstones that safe_ts has passed by
// the retention (E39) and returns their keys for the caller to delete on
// disk. Called with mu held.
func (e *Emulator) collectTombstonesLocked(c *collection) []string {
	if e.opts.TombstoneRetention < 0 {
		return nil
	}
	safe := c.safeTs()
	ret := durationToTSO(e.opts.TombstoneRetention)
	if safe <= ret {
		return nil
	}
	return c.docs.CollectTombstones(safe - ret)
}
