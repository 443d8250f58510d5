package schemastore

import (
	"fmt"
	"sort"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// jobDecoder turns a raw KV entry of mysql.tidb_ddl_job (or
// tidb_ddl_history) into a Job. The job_meta column is located by name in
// that table's TableInfo (rule SS14), never by a fixed id.
type jobDecoder struct {
	tableID int64
	column  rowcodec.Column
	view    rowcodec.RowView
}

func newJobDecoder(ti *model.TableInfo) (*jobDecoder, error) {
	c := ti.ColumnByName(jobMetaColumn)
	if c == nil {
		return nil, fmt.Errorf("schemastore: table %d %q has no %s column", ti.ID, ti.Name.O, jobMetaColumn)
	}
	return &jobDecoder{tableID: ti.ID, column: rowcodec.NewColumn(c.ID, &c.FieldType)}, nil
}

// decode parses the job stored in a put entry. The returned Job owns its
// memory (the entry's bytes are borrowed).
func (d *jobDecoder) decode(e *kvevent.RawKVEntry) (*model.Job, error) {
	_, key, _ := tablecodec.RemoveKeyspacePrefix(e.Key)
	tableID, handle, err := tablecodec.DecodeRecordKey(key)
	if err != nil {
		return nil, fmt.Errorf("schemastore: DDL job row key: %w", err)
	}
	if tableID != d.tableID {
		return nil, fmt.Errorf("schemastore: DDL job row key %x belongs to table %d, want %d", e.Key, tableID, d.tableID)
	}
	jobID := int64(0)
	if handle.IsInt() {
		jobID = handle.IntValue()
	}
	if err := d.view.Reset(e.Value); err != nil {
		return nil, fmt.Errorf("schemastore: DDL job %d row value: %w", jobID, err)
	}
	dat, found, err := d.view.Column(&d.column)
	if err != nil {
		return nil, fmt.Errorf("schemastore: DDL job %d %s column: %w", jobID, jobMetaColumn, err)
	}
	if !found || dat.IsNull() {
		return nil, fmt.Errorf("schemastore: DDL job %d row has no %s value (column id %d)", jobID, jobMetaColumn, d.column.ID)
	}
	job, err := model.ParseJob(dat.GetBytes())
	if err != nil {
		if pe, ok := err.(*model.ParseError); ok && pe.JobID == 0 {
			pe.JobID = jobID
		}
		return nil, err
	}
	if job.ID != jobID && jobID != 0 {
		return nil, fmt.Errorf("schemastore: DDL job row with handle %d holds job id %d", jobID, job.ID)
	}
	return job, nil
}

// spanKind tells the job table from the history table.
type spanKind int

const (
	spanJob spanKind = iota
	spanHistory
)

func (k spanKind) String() string {
	if k == spanHistory {
		return ddlHistoryTableName
	}
	return ddlJobTableName
}

// ddlConsumer receives one DDL span's changes (kvevent.Consumer).
type ddlConsumer struct {
	s        *Store
	kind     spanKind
	dec      *jobDecoder
	resolved uint64
}

// ConsumeKV implements kvevent.Consumer.
func (c *ddlConsumer) ConsumeKV(entries []kvevent.RawKVEntry) {
	c.s.writeMu.Lock()
	defer c.s.writeMu.Unlock()
	for i := range entries {
		if err := c.s.ingestLocked(c, &entries[i]); err != nil {
			c.s.fail(err)
			return
		}
	}
}

// AdvanceResolvedTs implements kvevent.Consumer.
func (c *ddlConsumer) AdvanceResolvedTs(ts uint64) {
	c.s.writeMu.Lock()
	defer c.s.writeMu.Unlock()
	if err := c.s.advanceLocked(c, ts); err != nil {
		c.s.fail(err)
	}
}

// pendingKey orders cached jobs: (commit ts, schema version, job id).
type pendingKey struct {
	ts    uint64
	ver   int64
	jobID int64
}

// ingestLocked filters one entry and caches its job (rules SS15-SS19).
func (s *Store) ingestLocked(c *ddlConsumer, e *kvevent.RawKVEntry) error {
	if s.failedErr() != nil || s.p == nil {
		return nil // failed or closed: deliveries are dropped
	}
	if e.OpType != kvevent.OpTypePut {
		return nil // the row is deleted when the job moves to history
	}
	job, err := c.dec.decode(e)
	if err != nil {
		return fmt.Errorf("schemastore: %s entry committed at %d: %w", c.kind, e.CRTs, err)
	}
	switch c.kind {
	case spanJob:
		if job.State != model.JobStateDone {
			return nil
		}
	case spanHistory:
		if job.State != model.JobStateSynced || (job.Type != model.ActionCreateTable && job.Type != model.ActionCreateTables) {
			return nil
		}
	}
	if job.BinlogInfo == nil {
		return fmt.Errorf("schemastore: %v committed at %d: finished job without a binlog block", job, e.CRTs)
	}
	// The Done row is committed in the same transaction as the schema
	// change, so its commit ts is the DDL's effective ts.
	job.BinlogInfo.FinishedTS = e.CRTs
	job.StartTS = e.StartTs
	if job.BinlogInfo.SchemaVersion == 0 {
		s.log.Info("schemastore: skip job with schema version 0", "job", job.ID, "type", job.Type.String())
		return nil
	}
	if e.CRTs <= c.resolved {
		// A re-scan after a region reconnect re-sends what was delivered
		// before: harmless when already applied; a job never applied
		// means the stream lost it (rule SS18).
		s.mu.RLock()
		applied := !s.h.last.less(jobPos{ts: e.CRTs, ver: job.BinlogInfo.SchemaVersion})
		s.mu.RUnlock()
		if applied {
			return nil
		}
		return fmt.Errorf("schemastore: %v committed at %d arrived after the %s span's resolved ts %d and was never applied",
			job, e.CRTs, c.kind, c.resolved)
	}
	k := pendingKey{ts: e.CRTs, ver: job.BinlogInfo.SchemaVersion, jobID: job.ID}
	if _, dup := s.pending[k]; dup {
		return nil
	}
	s.pending[k] = job
	return nil
}

// advanceLocked records a span's resolved ts and, when the minimum over all
// DDL spans passes cached jobs, applies them in (commit ts, schema version)
// order, persists the batch with the new resolved ts, then publishes it.
func (s *Store) advanceLocked(c *ddlConsumer, ts uint64) error {
	if s.failedErr() != nil || s.p == nil {
		return nil // failed or closed
	}
	if ts <= c.resolved {
		return nil
	}
	c.resolved = ts
	target := ts
	for _, o := range s.consumers {
		if o.resolved < target {
			target = o.resolved
		}
	}
	s.mu.RLock()
	cur := s.h.resolvedTs
	s.mu.RUnlock()
	if target <= cur {
		return nil
	}
	return s.applyUpToLocked(target)
}

// applyUpToLocked applies cached jobs with commit ts <= target and moves
// the resolved ts to target. Caller holds writeMu.
func (s *Store) applyUpToLocked(target uint64) error {
	var ready []pendingKey
	for k := range s.pending {
		if k.ts <= target {
			ready = append(ready, k)
		}
	}
	sort.Slice(ready, func(i, j int) bool {
		a, b := ready[i], ready[j]
		if a.ts != b.ts {
			return a.ts < b.ts
		}
		if a.ver != b.ver {
			return a.ver < b.ver
		}
		return a.jobID < b.jobID
	})
	ch := newChangeSet()
	s.mu.Lock()
	for _, k := range ready {
		job := s.pending[k]
		delete(s.pending, k)
		pos := jobPos{ts: k.ts, ver: k.ver}
		if !s.h.last.less(pos) {
			s.log.Info("schemastore: skip already applied job", "job", job.ID, "commit_ts", k.ts, "schema_version", k.ver)
			continue
		}
		ev, skip, err := s.h.applyJob(job, ch)
		if err != nil {
			s.mu.Unlock()
			return &JobError{JobID: job.ID, Type: job.Type.String(), CommitTs: k.ts, Err: err}
		}
		s.h.last = pos
		ch.last, ch.lastSet = pos, true
		ch.processed++
		if skip != "" {
			s.log.Info("schemastore: skip DDL job", "job", job.ID, "type", job.Type.String(), "commit_ts", k.ts, "reason", skip)
			continue
		}
		// The event's table infos are shared with the versions GetTableInfo
		// hands out; the stored event gets its own copy (rule SS40).
		priv := ev.Clone()
		s.h.events = append(s.h.events, priv)
		ch.events = append(ch.events, priv)
	}
	s.mu.Unlock()
	// Persist before publishing: a lookup never sees a resolved ts the
	// disk does not have (rule SS52).
	if err := s.p.update(func(w *txWriter) error { return w.writeChanges(ch, target) }); err != nil {
		return err
	}
	s.mu.Lock()
	s.h.resolvedTs = target
	close(s.advanced)
	s.advanced = make(chan struct{})
	s.mu.Unlock()
	return nil
}
