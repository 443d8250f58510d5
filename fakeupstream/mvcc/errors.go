package mvcc

import (
	"errors"
	"fmt"
)

// ErrLocked is matched (errors.Is) by every *LockedError.
var ErrLocked = errors.New("key is locked")

// LockedError: a read or prewrite met another transaction's lock.
type LockedError struct {
	Lock Lock
	// ReadTs is the read or start ts that was blocked.
	ReadTs uint64
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("mvcc: key %x is locked by txn start_ts=%d (primary %x, ttl %dms, op %s) at ts %d",
		e.Lock.Key, e.Lock.StartTs, e.Lock.Primary, e.Lock.TTL, e.Lock.Op, e.ReadTs)
}

func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// WriteConflictError: another transaction committed the key after our start.
type WriteConflictError struct {
	Key              []byte
	StartTs          uint64
	ConflictStartTs  uint64
	ConflictCommitTs uint64
}

func (e *WriteConflictError) Error() string {
	return fmt.Sprintf("mvcc: write conflict on key %x: txn start_ts=%d, conflicting txn start_ts=%d commit_ts=%d",
		e.Key, e.StartTs, e.ConflictStartTs, e.ConflictCommitTs)
}

// TxnRolledBackError: the transaction was already rolled back on Key.
type TxnRolledBackError struct {
	Key     []byte
	StartTs uint64
}

func (e *TxnRolledBackError) Error() string {
	return fmt.Sprintf("mvcc: txn start_ts=%d is already rolled back on key %x", e.StartTs, e.Key)
}

// TxnCommittedError: a rollback met a transaction already committed.
type TxnCommittedError struct {
	Key      []byte
	StartTs  uint64
	CommitTs uint64
}

func (e *TxnCommittedError) Error() string {
	return fmt.Sprintf("mvcc: txn start_ts=%d is already committed at %d on key %x", e.StartTs, e.CommitTs, e.Key)
}

// LockNotFoundError: commit found neither the lock nor a record of the txn.
type LockNotFoundError struct {
	Key     []byte
	StartTs uint64
}

func (e *LockNotFoundError) Error() string {
	return fmt.Sprintf("mvcc: txn start_ts=%d has no lock and no record on key %x", e.StartTs, e.Key)
}

// CommitTsExpiredError: the chosen commit ts is below the lock's min_commit_ts.
type CommitTsExpiredError struct {
	Key         []byte
	StartTs     uint64
	CommitTs    uint64
	MinCommitTs uint64
}

func (e *CommitTsExpiredError) Error() string {
	return fmt.Sprintf("mvcc: commit ts %d of txn start_ts=%d is below min_commit_ts %d on key %x",
		e.CommitTs, e.StartTs, e.MinCommitTs, e.Key)
}

// BadTimestampError: timestamps given by the caller break an invariant.
type BadTimestampError struct {
	What string
}

func (e *BadTimestampError) Error() string { return "mvcc: bad timestamp: " + e.What }

// ErrGCTooEarly is matched by every *GCTooEarlyError.
var ErrGCTooEarly = errors.New("GC life time is shorter than transaction duration")

// GCTooEarlyError: a read below the GC safe point. Its text contains TiKV's
// phrase so clients that recognise it (TiCDC) classify it the same way.
type GCTooEarlyError struct {
	ReadTs    uint64
	SafePoint uint64
}

func (e *GCTooEarlyError) Error() string {
	return fmt.Sprintf("mvcc: read at ts %d is below GC safe point %d: GC life time is shorter than transaction duration",
		e.ReadTs, e.SafePoint)
}

func (e *GCTooEarlyError) Is(target error) bool { return target == ErrGCTooEarly }
