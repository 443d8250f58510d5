// Package minicdc is the embedded Mini-CDC runtime: it subscribes the record
// spans of a fixed set of TiDB tables through a KV source, decodes rows with
// the schema valid at commit_ts-1, emits DDL behind the min-resolved-ts fence
// and reports coalesced checkpoints, all through one Callback. See
// specs/minicdc.md for the contract.
package minicdc

import (
	"context"
	"fmt"
)

// StartConfig is what a runtime is started with. It is validated before any
// dependency is touched (specs/minicdc.md, startup validation).
type StartConfig struct {
	// KeyspaceID is the TiDB keyspace (API v2). Required (non-zero) when
	// NextGen is set; ignored otherwise.
	KeyspaceID uint32
	// NextGen selects keyspace-prefixed key ranges (TiDB next-gen / API v2).
	NextGen bool
	// StartTs is exclusive: changes with commit_ts <= StartTs are dropped.
	StartTs uint64
	// TableIDs are physical table ids (partition ids for partitioned
	// tables). Unique, each > 0; empty when the host picks every table up
	// from the DDL stream (M3, M53). ChangeTables changes the set later.
	TableIDs []int64
	// DDLPollLimit is the trigger-DDL fetch batch size. Must be > 0.
	DDLPollLimit int
	// TableStartTs, when it holds a ts above StartTs for a table, is where
	// that table starts instead (exclusive, M55): a host resuming from
	// per-table progress starts each table at its own. Tables not in it
	// start at StartTs.
	TableStartTs map[int64]uint64
}

// ConfigError names the StartConfig field that is invalid and why.
type ConfigError struct {
	Field  string
	Value  string
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("minicdc: invalid StartConfig.%s = %s: %s", e.Field, e.Value, e.Reason)
}

// Validate checks the hard startup rules and returns a *ConfigError for the
// first violation.
func (c *StartConfig) Validate() error {
	if c.DDLPollLimit <= 0 {
		return &ConfigError{Field: "DDLPollLimit", Value: fmt.Sprint(c.DDLPollLimit), Reason: "must be > 0"}
	}
	seen := make(map[int64]int, len(c.TableIDs))
	for i, id := range c.TableIDs {
		if id <= 0 {
			return &ConfigError{Field: fmt.Sprintf("TableIDs[%d]", i), Value: fmt.Sprint(id), Reason: "table ids must be > 0"}
		}
		if j, dup := seen[id]; dup {
			return &ConfigError{Field: fmt.Sprintf("TableIDs[%d]", i), Value: fmt.Sprint(id), Reason: fmt.Sprintf("duplicate of TableIDs[%d]", j)}
		}
		seen[id] = i
	}
	if c.NextGen && c.KeyspaceID == 0 {
		return &ConfigError{Field: "KeyspaceID", Value: "0", Reason: "must be non-zero in next-gen (keyspace) mode"}
	}
	return nil
}

// RowChanged is one decoded row change delivered to OnRowChanged.
//
// Ownership (specs/minicdc.md): PreRow and Row are borrowed views valid only
// during the callback; RowKey is an event-owned copy (copy again to keep it
// long-term); TableInfo is immutable and may be kept.
type RowChanged struct {
	TableID   int64
	StartTs   uint64
	CommitTs  uint64
	RowType   RowType
	PreRow    Row
	Row       Row
	RowKey    []byte
	TableInfo *TableInfo
}

// Checkpoint is a coalesced resolved-progress snapshot. TableResolvedTs is a
// copy the callee may keep.
type Checkpoint struct {
	GlobalResolvedTs uint64
	TableResolvedTs  map[int64]uint64
}

// Callback receives the runtime's output. Any error it returns is fatal: the
// runtime stops and reports that error (fail-fast, never skip).
type Callback interface {
	OnRowChanged(ctx context.Context, ev RowChanged) error
	OnDDL(ctx context.Context, ddl DDL) error
	OnCheckpoint(ctx context.Context, cp Checkpoint) error
}
