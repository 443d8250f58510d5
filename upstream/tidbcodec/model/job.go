package model

import (
	"encoding/json"
	"fmt"
)

// SchemaState is TiDB's online-DDL state of a schema object.
type SchemaState byte

// Schema states (TiDB numbering).
const (
	StateNone                 SchemaState = 0
	StateDeleteOnly           SchemaState = 1
	StateWriteOnly            SchemaState = 2
	StateWriteReorganization  SchemaState = 3
	StateDeleteReorganization SchemaState = 4
	// StatePublic is the only state in which an object is visible to users.
	StatePublic        SchemaState = 5
	StateReplicaOnly   SchemaState = 6
	StateGlobalTxnOnly SchemaState = 7
)

var schemaStateNames = [...]string{"none", "delete only", "write only", "write reorganization", "delete reorganization", "public", "replica only", "global txn only"}

func (s SchemaState) String() string {
	if int(s) < len(schemaStateNames) {
		return schemaStateNames[s]
	}
	return fmt.Sprintf("schema state(%d)", byte(s))
}

// JobState is a DDL job's state.
type JobState int

// Job states (TiDB numbering).
const (
	JobStateNone         JobState = 0
	JobStateRunning      JobState = 1
	JobStateRollingback  JobState = 2
	JobStateRollbackDone JobState = 3
	JobStateDone         JobState = 4
	JobStateCancelled    JobState = 5
	JobStateSynced       JobState = 6
	JobStateCancelling   JobState = 7
	JobStateQueueing     JobState = 8
	JobStatePaused       JobState = 9
	JobStatePausing      JobState = 10
)

var jobStateNames = [...]string{"none", "running", "rollingback", "rollback done", "done", "cancelled", "synced", "cancelling", "queueing", "paused", "pausing"}

func (s JobState) String() string {
	if s >= 0 && int(s) < len(jobStateNames) {
		return jobStateNames[s]
	}
	return fmt.Sprintf("job state(%d)", int(s))
}

// JobVersion is the job JSON layout: 1 = positional raw_args array (before
// TiDB 8.4), 2 = one typed raw_args object (8.4+).
type JobVersion int64

// Job versions.
const (
	JobVersion1 JobVersion = 1
	JobVersion2 JobVersion = 2
)

// HistoryInfo is the job's `binlog` block. TiDB does not tag these fields,
// so the JSON keys are the Go field names.
type HistoryInfo struct {
	SchemaVersion      int64
	DBInfo             *DBInfo
	TableInfo          *TableInfo
	FinishedTS         uint64
	MultipleTableInfos []*TableInfo
}

// SubJob is one step of a multi-schema change.
type SubJob struct {
	Type          ActionType      `json:"type"`
	RawArgs       json.RawMessage `json:"raw_args"`
	SchemaState   SchemaState     `json:"schema_state"`
	SnapshotVer   uint64          `json:"snapshot_ver"`
	RealStartTS   uint64          `json:"real_start_ts"`
	Revertible    bool            `json:"revertible"`
	State         JobState        `json:"state"`
	RowCount      int64           `json:"row_count"`
	Warning       json.RawMessage `json:"warning"`
	SchemaVersion int64           `json:"schema_version"`
	ReorgTp       int             `json:"reorg_tp"`
}

// MultiSchemaInfo is the `multi_schema_info` block of an ActionMultiSchemaChange job.
type MultiSchemaInfo struct {
	SubJobs    []*SubJob `json:"sub_jobs"`
	Revertible bool      `json:"revertible"`
	Seq        int32     `json:"seq"`
}

// InvolvingSchemaInfo names a schema object a job touches. For RENAME TABLES
// TiDB lists (old db, old table), (new db, new table) for each table in turn.
type InvolvingSchemaInfo struct {
	Database      string `json:"database,omitempty"`
	Table         string `json:"table,omitempty"`
	Policy        string `json:"policy,omitempty"`
	ResourceGroup string `json:"resource_group,omitempty"`
	Mode          string `json:"mode,omitempty"`
}

// Job is a DDL job as stored in `mysql.tidb_ddl_job.job_meta` and
// `mysql.tidb_ddl_history.job_meta`.
//
// Fields whose shape varies across TiDB versions (errors, warnings, reorg
// meta, trace info, raw_args) are kept as raw JSON.
type Job struct {
	ID                  int64                 `json:"id"`
	Type                ActionType            `json:"type"`
	SchemaID            int64                 `json:"schema_id"`
	TableID             int64                 `json:"table_id"`
	SchemaName          string                `json:"schema_name"`
	TableName           string                `json:"table_name"`
	State               JobState              `json:"state"`
	Warning             json.RawMessage       `json:"warning"`
	Error               json.RawMessage       `json:"err"`
	ErrorCount          int64                 `json:"err_count"`
	RowCount            int64                 `json:"row_count"`
	RawArgs             json.RawMessage       `json:"raw_args"`
	SchemaState         SchemaState           `json:"schema_state"`
	SnapshotVer         uint64                `json:"snapshot_ver"`
	RealStartTS         uint64                `json:"real_start_ts"`
	StartTS             uint64                `json:"start_ts"`
	DependencyID        int64                 `json:"dependency_id"`
	Query               string                `json:"query"`
	BinlogInfo          *HistoryInfo          `json:"binlog"`
	Version             JobVersion            `json:"version"`
	ReorgMeta           json.RawMessage       `json:"reorg_meta"`
	MultiSchemaInfo     *MultiSchemaInfo      `json:"multi_schema_info"`
	Priority            int                   `json:"priority"`
	SeqNum              uint64                `json:"seq_num"`
	Charset             string                `json:"charset"`
	Collate             string                `json:"collate"`
	InvolvingSchemaInfo []InvolvingSchemaInfo `json:"involving_schema_info,omitempty"`
	AdminOperator       int                   `json:"admin_operator"`
	TraceInfo           json.RawMessage       `json:"trace_info"`
	BDRRole             string                `json:"bdr_role"`
	CDCWriteSource      uint64                `json:"cdc_write_source"`
	LocalMode           bool                  `json:"local_mode"`
	SQLMode             uint64                `json:"sql_mode"`
	SessionVars         map[string]string     `json:"session_vars,omitempty"`
	LastSchemaVersion   int64                 `json:"last_schema_version"`
}

// SchemaVersion returns binlog.SchemaVersion, or 0 when the block is absent.
func (j *Job) SchemaVersion() int64 {
	if j.BinlogInfo == nil {
		return 0
	}
	return j.BinlogInfo.SchemaVersion
}

// FinishedTS returns binlog.FinishedTS, or 0 when the block is absent.
func (j *Job) FinishedTS() uint64 {
	if j.BinlogInfo == nil {
		return 0
	}
	return j.BinlogInfo.FinishedTS
}

// IsDone reports whether the job finished with its schema change applied
// (Done in tidb_ddl_job, Synced in tidb_ddl_history).
func (j *Job) IsDone() bool { return j.State == JobStateDone || j.State == JobStateSynced }

func (j *Job) String() string {
	return fmt.Sprintf("job %d (%s, state %s, schema %d %q, table %d %q, schema version %d)",
		j.ID, j.Type, j.State, j.SchemaID, j.SchemaName, j.TableID, j.TableName, j.SchemaVersion())
}
