package grpcserver

import (
	"context"
	"errors"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/mvcc"
)

// The write path lets client-go run optimistic two-phase transactions
// against the fake (store.Begin / Set / Commit). Every request is
// replayed on the cluster's Txn API under the client's start ts, so the
// CDC feed sees exactly the PREWRITE / COMMIT / ROLLBACK rows a real TiKV
// would emit. 1PC and async commit are not offered: the answers make
// client-go fall back to plain 2PC (G44).

// writeKeyError converts a cluster write error into TiKV's KeyError. (G44)
func writeKeyError(err error) *kvrpcpb.KeyError {
	var (
		le *mvcc.LockedError
		wc *mvcc.WriteConflictError
		rb *mvcc.TxnRolledBackError
		nf *mvcc.LockNotFoundError
		ex *mvcc.CommitTsExpiredError
	)
	switch {
	case errors.As(err, &le):
		return &kvrpcpb.KeyError{Locked: lockInfo(&le.Lock)}
	case errors.As(err, &wc):
		return &kvrpcpb.KeyError{Conflict: &kvrpcpb.WriteConflict{
			StartTs: wc.StartTs, ConflictTs: wc.ConflictStartTs, ConflictCommitTs: wc.ConflictCommitTs, Key: wc.Key,
			Reason: kvrpcpb.WriteConflict_Optimistic,
		}}
	case errors.As(err, &rb):
		return &kvrpcpb.KeyError{Abort: err.Error(), TxnLockNotFound: &kvrpcpb.TxnLockNotFound{Key: rb.Key}}
	case errors.As(err, &nf):
		return &kvrpcpb.KeyError{Abort: err.Error(), TxnLockNotFound: &kvrpcpb.TxnLockNotFound{Key: nf.Key}}
	case errors.As(err, &ex):
		return &kvrpcpb.KeyError{CommitTsExpired: &kvrpcpb.CommitTsExpired{
			StartTs: ex.StartTs, AttemptedCommitTs: ex.CommitTs, Key: ex.Key, MinCommitTs: ex.MinCommitTs,
		}}
	}
	return &kvrpcpb.KeyError{Abort: err.Error()}
}

// KvPrewrite writes the mutations' locks at start_version with the
// client's primary and TTL. Insert and CheckNotExists fail with
// already_exist when the key has a value at the start ts. try_one_pc is
// answered with one_pc_commit_ts 0 and use_async_commit with
// min_commit_ts 0, which make client-go continue with plain 2PC. (G44)
func (t *tikvServer) KvPrewrite(ctx context.Context, req *kvrpcpb.PrewriteRequest) (*kvrpcpb.PrewriteResponse, error) {
	if err := t.down(); err != nil {
		return nil, err
	}
	keys := make([][]byte, 0, len(req.GetMutations()))
	for _, m := range req.GetMutations() {
		keys = append(keys, m.GetKey())
	}
	if _, re := t.check(req.GetContext(), keys...); re != nil {
		return &kvrpcpb.PrewriteResponse{RegionError: re}, nil
	}
	txn := t.s.c.BeginAt(req.GetStartVersion())
	txn.SetPrimary(req.GetPrimaryLock())
	txn.SetTTL(max(req.GetLockTtl(), 1))
	var toLock [][]byte
	for _, m := range req.GetMutations() {
		switch m.GetOp() {
		case kvrpcpb.Op_Insert, kvrpcpb.Op_CheckNotExists:
			v, err := t.s.c.Get(ctx, m.GetKey(), req.GetStartVersion())
			if err != nil {
				return &kvrpcpb.PrewriteResponse{Errors: []*kvrpcpb.KeyError{writeKeyError(err)}}, nil
			}
			if v != nil {
				return &kvrpcpb.PrewriteResponse{Errors: []*kvrpcpb.KeyError{{AlreadyExist: &kvrpcpb.AlreadyExist{Key: m.GetKey()}}}}, nil
			}
			if m.GetOp() == kvrpcpb.Op_CheckNotExists {
				continue
			}
			txn.Set(m.GetKey(), m.GetValue())
		case kvrpcpb.Op_Put:
			txn.Set(m.GetKey(), m.GetValue())
		case kvrpcpb.Op_Del:
			txn.Delete(m.GetKey())
		case kvrpcpb.Op_Lock:
			txn.LockKey(m.GetKey())
		default:
			return &kvrpcpb.PrewriteResponse{Errors: []*kvrpcpb.KeyError{{Abort: "fake tikv: prewrite op " + m.GetOp().String() + " is not served"}}}, nil
		}
		toLock = append(toLock, m.GetKey())
	}
	if len(toLock) > 0 {
		if err := txn.Prewrite(toLock...); err != nil {
			return &kvrpcpb.PrewriteResponse{Errors: []*kvrpcpb.KeyError{writeKeyError(err)}}, nil
		}
	}
	return &kvrpcpb.PrewriteResponse{}, nil
}

// KvCommit commits the txn's locks on keys at commit_version. Keys already
// committed by this txn are fine (a retried commit); a missing lock of a
// rolled-back txn is an error. (G44)
func (t *tikvServer) KvCommit(ctx context.Context, req *kvrpcpb.CommitRequest) (*kvrpcpb.CommitResponse, error) {
	if err := t.down(); err != nil {
		return nil, err
	}
	if _, re := t.check(req.GetContext(), req.GetKeys()...); re != nil {
		return &kvrpcpb.CommitResponse{RegionError: re}, nil
	}
	txn := t.s.c.BeginAt(req.GetStartVersion())
	if err := txn.CommitKeys(req.GetCommitVersion(), req.GetKeys()...); err != nil {
		if errors.Is(err, fakeupstream.ErrCommitBelowResolved) {
			return &kvrpcpb.CommitResponse{Error: &kvrpcpb.KeyError{Abort: err.Error()}}, nil
		}
		return &kvrpcpb.CommitResponse{Error: writeKeyError(err)}, nil
	}
	return &kvrpcpb.CommitResponse{CommitVersion: req.GetCommitVersion()}, nil
}

// KvBatchRollback rolls the txn back on keys (rollback records are left so
// a late prewrite cannot succeed). (G44)
func (t *tikvServer) KvBatchRollback(ctx context.Context, req *kvrpcpb.BatchRollbackRequest) (*kvrpcpb.BatchRollbackResponse, error) {
	if err := t.down(); err != nil {
		return nil, err
	}
	if _, re := t.check(req.GetContext(), req.GetKeys()...); re != nil {
		return &kvrpcpb.BatchRollbackResponse{RegionError: re}, nil
	}
	txn := t.s.c.BeginAt(req.GetStartVersion())
	for _, k := range req.GetKeys() {
		txn.LockKey(k)
	}
	if err := txn.Rollback(); err != nil {
		return &kvrpcpb.BatchRollbackResponse{Error: writeKeyError(err)}, nil
	}
	return &kvrpcpb.BatchRollbackResponse{}, nil
}

// KvCleanup decides one key of a txn like CheckTxnStatus: committed
// answers the commit ts, a live lock is Locked, otherwise it is rolled
// back. (G44)
func (t *tikvServer) KvCleanup(ctx context.Context, req *kvrpcpb.CleanupRequest) (*kvrpcpb.CleanupResponse, error) {
	if err := t.down(); err != nil {
		return nil, err
	}
	if _, re := t.check(req.GetContext(), req.GetKey()); re != nil {
		return &kvrpcpb.CleanupResponse{RegionError: re}, nil
	}
	st := t.s.c.CheckTxnStatus(req.GetKey(), req.GetStartVersion())
	switch {
	case st.Lock != nil:
		return &kvrpcpb.CleanupResponse{Error: &kvrpcpb.KeyError{Locked: lockInfo(st.Lock)}}, nil
	case st.CommitTs > 0:
		return &kvrpcpb.CleanupResponse{CommitVersion: st.CommitTs}, nil
	}
	return &kvrpcpb.CleanupResponse{}, nil
}
