package normalize

import (
	"fmt"
	"time"

	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/reorder"
)

// Table is one configured table path with the schema it has at StartTs.
type Table struct {
	// PhysicalID is the path's physical table id (a partition id for a
	// partitioned table).
	PhysicalID int64
	// SchemaID and Database name the table's database.
	SchemaID int64
	Database string
	// Info is the logical table's schema at StartTs (the partitioned table
	// for a partition). Read at Open only.
	Info *minicdc.TableInfo
	// Collection, when set, is the collection the table is mirrored into,
	// overriding Config.CollectionName (N3). A restart after a table-set
	// change (N34) sets it so the binding made by the first run survives
	// renames.
	Collection string
}

// Config configures a Bridge.
type Config struct {
	// ClientID identifies this adapter instance (meta.client_id). Required.
	ClientID string
	// KeyspaceID is set in next-gen (keyspace) mode (N1).
	KeyspaceID uint32
	// StartTs is the Mini-CDC start ts of this run (use ResumePoint) and
	// the ddl_commit_ts of bootstrap requests (N30). Must be > 0.
	StartTs uint64
	// Tables are the configured table paths.
	Tables []Table
	// CollectionName maps a table to its collection (N3); nil uses
	// DefaultCollectionName.
	CollectionName func(db, table string) string
	// Roles overrides field roles per collection and column (N18).
	Roles map[string]RoleOverrides
	// DisableMetadataAux turns the metadata_aux modality off (N18).
	DisableMetadataAux bool

	MaxUnsealedRows    int
	MaxUnsealedBytes   int64
	BackpressureWindow time.Duration
	// Timer is the clock of the backpressure wait; nil uses wall time.
	Timer reorder.Timer
	// MaxBatchRows caps a MutationBatch (N21).
	MaxBatchRows int
	// MaxBatchBytes caps the estimated encoded size of a MutationBatch
	// (N21); a batch holds at least one mutation.
	MaxBatchBytes int64
	// Spill sets the shared memory quota and the spill directory (RS1).
	Spill SpillConfig
}

func (c *Config) withDefaults() (Config, error) {
	out := *c
	if out.ClientID == "" {
		return out, fmt.Errorf("normalize: Config.ClientID is required")
	}
	if out.StartTs == 0 {
		return out, fmt.Errorf("normalize: Config.StartTs must be > 0")
	}
	// Tables may be empty: a filtered adapter starts with no table and
	// adds them as they are created (specs/tableset.md LT8).
	if out.CollectionName == nil {
		out.CollectionName = DefaultCollectionName
	}
	if out.MaxUnsealedRows == 0 && out.Spill.Memory == nil {
		out.MaxUnsealedRows = DefaultMaxUnsealedRows
	}
	if out.MaxUnsealedBytes == 0 && out.Spill.Memory == nil {
		out.MaxUnsealedBytes = DefaultMaxUnsealedBytes
	}
	if out.BackpressureWindow == 0 {
		out.BackpressureWindow = DefaultBackpressureWindow
	}
	if out.Timer == nil {
		out.Timer = reorder.RealTimer{}
	}
	if out.MaxBatchRows <= 0 {
		out.MaxBatchRows = DefaultMaxBatchRows
	}
	if out.MaxBatchBytes <= 0 {
		out.MaxBatchBytes = DefaultMaxBatchBytes
	}
	return out, nil
}
