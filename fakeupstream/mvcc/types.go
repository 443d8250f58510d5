// Package mvcc is a Percolator-style multi-version store over raw TiDB keys,
// the transactional core of the fake TiKV: prewrite writes locks, commit
// turns them into write records at a commit ts, rollback leaves a
// protective rollback record, 1PC writes records directly, and async-commit
// locks carry min_commit_ts and their secondaries so a resolver can finish
// the transaction. Snapshot reads see committed data only and stop at a
// blocking lock with a typed error; a GC safe point rejects older reads.
//
// The store is pure and single-threaded (the cluster serialises access) and
// takes every timestamp from its caller. Every data change is reported to an
// Observer so the CDC feed can mirror TiKV's EventFeed.
package mvcc

import "fmt"

// Op is what a mutation or lock does to its key (kvrpcpb.Op subset).
type Op uint8

const (
	OpPut Op = iota + 1
	OpDel
	// OpLock locks a key without changing it (SELECT FOR UPDATE, unique
	// checks). Its commit leaves a WriteLock record, invisible to reads and
	// to CDC.
	OpLock
)

func (o Op) String() string {
	switch o {
	case OpPut:
		return "put"
	case OpDel:
		return "del"
	case OpLock:
		return "lock"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Mutation is one key change in a transaction.
type Mutation struct {
	Op    Op
	Key   []byte
	Value []byte
}

// Lock is a prewrite lock on one key.
type Lock struct {
	Key     []byte
	Primary []byte
	StartTs uint64
	// TTL in milliseconds, counted from the physical part of StartTs.
	TTL   uint64
	Op    Op
	Value []byte
	// MinCommitTs is the lowest commit ts the transaction may use (async
	// commit: the commit ts is the max over all its locks).
	MinCommitTs    uint64
	UseAsyncCommit bool
	// Secondaries are the other keys of an async-commit transaction; set on
	// the primary lock only.
	Secondaries [][]byte
}

// WriteKind is the type of a write record.
type WriteKind uint8

const (
	WritePut WriteKind = iota + 1
	WriteDelete
	WriteLock
	// WriteRollback protects a rolled-back start ts against a late prewrite;
	// its CommitTs equals its StartTs.
	WriteRollback
)

func (k WriteKind) String() string {
	switch k {
	case WritePut:
		return "put"
	case WriteDelete:
		return "delete"
	case WriteLock:
		return "lock"
	case WriteRollback:
		return "rollback"
	}
	return fmt.Sprintf("write(%d)", uint8(k))
}

// Write is one committed version record of a key.
type Write struct {
	Kind     WriteKind
	StartTs  uint64
	CommitTs uint64
	Value    []byte
}

// isData reports whether the record changes what reads see.
func (w *Write) isData() bool { return w.Kind == WritePut || w.Kind == WriteDelete }

// ChangeKind is what an Observer is told.
type ChangeKind uint8

const (
	// ChangePrewrite: a lock was written (Value, OldValue set).
	ChangePrewrite ChangeKind = iota + 1
	// ChangeCommit: a lock became a write record at CommitTs.
	ChangeCommit
	// ChangeRollback: a lock was removed without commit.
	ChangeRollback
	// ChangeCommitted: a 1PC write record appeared (Value, OldValue set).
	ChangeCommitted
)

func (k ChangeKind) String() string {
	switch k {
	case ChangePrewrite:
		return "prewrite"
	case ChangeCommit:
		return "commit"
	case ChangeRollback:
		return "rollback"
	case ChangeCommitted:
		return "committed"
	}
	return fmt.Sprintf("change(%d)", uint8(k))
}

// Change is one data change as TiKV's CDC observer sees it. Lock-only
// mutations (OpLock) are not reported, as TiKV's CDC skips them.
// The byte slices are owned by the store and must not be modified.
type Change struct {
	Kind     ChangeKind
	Op       Op
	Key      []byte
	StartTs  uint64
	CommitTs uint64
	Value    []byte
	// OldValue is the latest committed value of Key before this
	// transaction (nil when absent or deleted).
	OldValue []byte
}

// Observer receives changes synchronously, in the order they are applied.
type Observer func(Change)
