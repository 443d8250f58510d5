package schemastore

import (
	"errors"
	"fmt"
)

// Sentinel kinds for errors.Is. Every error the store returns wraps one of
// them, so callers classify without string matching.
var (
	// ErrNotRegistered: an API call before RegisterKeyspace succeeded (SS1).
	ErrNotRegistered = errors.New("schemastore: keyspace not registered")
	// ErrNotReady: the store's resolved ts is behind the asked ts; poll again.
	ErrNotReady = errors.New("schemastore: not ready")
	// ErrBelowGC: the asked ts is below the store's GC ts (history gone).
	ErrBelowGC = errors.New("schemastore: ts below GC ts")
	// ErrUnknownTable: the store never saw the table id.
	ErrUnknownTable = errors.New("schemastore: unknown table")
	// ErrNotYetCreated: the table did not exist yet at the asked ts.
	ErrNotYetCreated = errors.New("schemastore: table not yet created")
	// ErrDropped: the table was dropped at or before the asked ts.
	ErrDropped = errors.New("schemastore: table dropped")
	// ErrStopped: the keyspace context ended or Close was called.
	ErrStopped = errors.New("schemastore: stopped")
	// ErrCorrupt: the persisted store is torn or inconsistent.
	ErrCorrupt = errors.New("schemastore: corrupt store")
	// ErrInconsistent: a DDL job contradicts the history (fatal).
	ErrInconsistent = errors.New("schemastore: inconsistent DDL history")
	// ErrBadInput: an argument is invalid (limit <= 0, ...).
	ErrBadInput = errors.New("schemastore: invalid argument")
)

// LookupError is returned by GetTableInfo and friends. Kind is one of the
// sentinels above; errors.Is(err, Kind) holds.
type LookupError struct {
	Kind    error
	TableID int64
	Ts      uint64
	// ResolvedTs, GCTs: the store's bounds when the lookup failed.
	ResolvedTs uint64
	GCTs       uint64
	// CreatedTs / DroppedTs: set for ErrNotYetCreated / ErrDropped.
	CreatedTs uint64
	DroppedTs uint64
}

func (e *LookupError) Error() string {
	switch e.Kind {
	case ErrNotReady:
		return fmt.Sprintf("%v: table %d at ts %d, store resolved ts is %d", e.Kind, e.TableID, e.Ts, e.ResolvedTs)
	case ErrBelowGC:
		return fmt.Sprintf("%v: table %d at ts %d, GC ts is %d", e.Kind, e.TableID, e.Ts, e.GCTs)
	case ErrNotYetCreated:
		return fmt.Sprintf("%v: table %d at ts %d, created at %d", e.Kind, e.TableID, e.Ts, e.CreatedTs)
	case ErrDropped:
		return fmt.Sprintf("%v: table %d at ts %d, dropped at %d", e.Kind, e.TableID, e.Ts, e.DroppedTs)
	default:
		return fmt.Sprintf("%v: table %d at ts %d", e.Kind, e.TableID, e.Ts)
	}
}

func (e *LookupError) Unwrap() error { return e.Kind }

// Temporary reports whether retrying later can succeed (not ready only).
func (e *LookupError) Temporary() bool { return e.Kind == ErrNotReady }

// GCBoundary reports a deterministic GC-boundary error.
func (e *LookupError) GCBoundary() bool { return e.Kind == ErrBelowGC }

// GCError says a start ts is below a GC safe point or the store's GC ts; it
// names both timestamps.
type GCError struct {
	What    string // "initial snapshot", "RegisterTable", "FetchTableTriggerDDLEvents", ...
	Ts      uint64
	GCTs    uint64
	GCWhose string // "cluster GC safe point" or "store GC ts"
}

func (e *GCError) Error() string {
	return fmt.Sprintf("schemastore: %s: ts %d is below the %s %d", e.What, e.Ts, e.GCWhose, e.GCTs)
}

func (e *GCError) Unwrap() error    { return ErrBelowGC }
func (e *GCError) GCBoundary() bool { return true }

// JobError is a DDL job the store could not apply; the store stops.
type JobError struct {
	JobID    int64
	Type     string
	CommitTs uint64
	Err      error
}

func (e *JobError) Error() string {
	return fmt.Sprintf("schemastore: DDL job %d (%s) committed at %d: %v", e.JobID, e.Type, e.CommitTs, e.Err)
}

func (e *JobError) Unwrap() error { return e.Err }

// CorruptError names what is wrong with a persisted store.
type CorruptError struct {
	Path   string
	Bucket string
	Key    []byte
	Reason string
}

func (e *CorruptError) Error() string {
	s := fmt.Sprintf("schemastore: corrupt store %s", e.Path)
	if e.Bucket != "" {
		s += fmt.Sprintf(" bucket %q", e.Bucket)
	}
	if e.Key != nil {
		s += fmt.Sprintf(" key %x", e.Key)
	}
	return s + ": " + e.Reason
}

func (e *CorruptError) Unwrap() error { return ErrCorrupt }

func inconsistent(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInconsistent, fmt.Sprintf(format, args...))
}
