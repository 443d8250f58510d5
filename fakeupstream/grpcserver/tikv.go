package grpcserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/pingcap/kvproto/pkg/errorpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/pingcap/kvproto/pkg/tikvpb"

	"github.com/searchfabric/sfemu/fakeupstream/mvcc"
	"github.com/searchfabric/sfemu/fakeupstream/topology"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
)

// tikvServer is one store's transactional KV service. Every request names
// a region in its kvrpcpb.Context; the region must exist, be led by this
// store and carry the current epoch, and every key must lie inside it,
// otherwise the answer is the region error TiKV sends (G31-G34). Data is
// read from the cluster's MVCC store.
type tikvServer struct {
	tikvpb.UnimplementedTikvServer
	s       *Servers
	storeID uint64
}

// regionScope is a validated request region with its raw bounds.
type regionScope struct {
	r          topology.Region
	rawS, rawE []byte // raw bounds (nil end = +inf)
}

// check validates the request context against the topology. keys are raw.
func (t *tikvServer) check(rc *kvrpcpb.Context, keys ...[]byte) (*regionScope, *errorpb.Error) {
	if want := rc.GetPeer().GetStoreId(); want != 0 && want != t.storeID {
		// The client meant another store (stale address cache). (G31)
		return nil, &errorpb.Error{Message: fmt.Sprintf("store not match: request for store %d reached store %d", want, t.storeID),
			StoreNotMatch: &errorpb.StoreNotMatch{RequestStoreId: want, ActualStoreId: t.storeID}}
	}
	r, ok := t.s.c.Region(rc.GetRegionId())
	if !ok {
		return nil, &errorpb.Error{Message: fmt.Sprintf("region %d not found", rc.GetRegionId()),
			RegionNotFound: &errorpb.RegionNotFound{RegionId: rc.GetRegionId()}}
	}
	if r.Leader != t.storeID {
		ne := &errorpb.NotLeader{RegionId: r.ID, Leader: leaderPeer(&r)}
		return nil, &errorpb.Error{Message: fmt.Sprintf("peer on store %d is not leader of region %d", t.storeID, r.ID), NotLeader: ne}
	}
	if ep := rc.GetRegionEpoch(); ep == nil || ep.GetVersion() != r.Version || ep.GetConfVer() != r.ConfVer {
		return nil, t.epochNotMatch(&r, ep)
	}
	sc := &regionScope{r: r}
	var err error
	if sc.rawS, err = rawKeyOf(r.StartKey); err == nil {
		sc.rawE, err = rawKeyOf(r.EndKey)
	}
	if err != nil {
		return nil, &errorpb.Error{Message: err.Error()}
	}
	for _, k := range keys {
		if !sc.contains(k) {
			return nil, &errorpb.Error{Message: fmt.Sprintf("key %x is not in region %d", k, r.ID),
				KeyNotInRegion: &errorpb.KeyNotInRegion{Key: k, RegionId: r.ID, StartKey: sc.rawS, EndKey: sc.rawE}}
		}
	}
	return sc, nil
}

// epochNotMatch lists the regions now covering the requested region's
// range (the current region itself, plus its split siblings when the
// client's version is older), as TiKV does after a split. (G33)
func (t *tikvServer) epochNotMatch(r *topology.Region, ep *metapb.RegionEpoch) *errorpb.Error {
	cur := []*metapb.Region{r.Meta()}
	return &errorpb.Error{
		Message:       fmt.Sprintf("epoch not match: region %d request epoch %v, current %v", r.ID, ep, r.Epoch()),
		EpochNotMatch: &errorpb.EpochNotMatch{CurrentRegions: cur},
	}
}

func (sc *regionScope) contains(raw []byte) bool {
	return bytes.Compare(raw, sc.rawS) >= 0 && (sc.rawE == nil || bytes.Compare(raw, sc.rawE) < 0)
}

// clip narrows raw [start, end) (empty end = +inf) to the region.
func (sc *regionScope) clip(start, end []byte) ([]byte, []byte) {
	if bytes.Compare(start, sc.rawS) < 0 {
		start = sc.rawS
	}
	if len(end) == 0 || (sc.rawE != nil && bytes.Compare(sc.rawE, end) < 0) {
		end = sc.rawE
	}
	return start, end
}

func rawKeyOf(cmp []byte) ([]byte, error) {
	if len(cmp) == 0 {
		return nil, nil
	}
	rest, raw, err := codec.DecodeBytes(cmp, nil)
	if err != nil {
		return nil, fmt.Errorf("region boundary %x is not a comparable key: %w", cmp, err)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("region boundary %x has %d trailing bytes", cmp, len(rest))
	}
	return raw, nil
}

func lockOp(op mvcc.Op) kvrpcpb.Op {
	switch op {
	case mvcc.OpPut:
		return kvrpcpb.Op_Put
	case mvcc.OpDel:
		return kvrpcpb.Op_Del
	}
	return kvrpcpb.Op_Lock
}

func lockInfo(l *mvcc.Lock) *kvrpcpb.LockInfo {
	return &kvrpcpb.LockInfo{
		PrimaryLock:    l.Primary,
		LockVersion:    l.StartTs,
		Key:            l.Key,
		LockTtl:        l.TTL,
		TxnSize:        uint64(len(l.Secondaries) + 1),
		LockType:       lockOp(l.Op),
		UseAsyncCommit: l.UseAsyncCommit,
		MinCommitTs:    l.MinCommitTs,
		Secondaries:    l.Secondaries,
	}
}

// keyError converts an MVCC error: a lock becomes KeyError.Locked (the
// client resolves it and retries), anything else aborts. (G35)
func keyError(err error) *kvrpcpb.KeyError {
	var le *mvcc.LockedError
	if errors.As(err, &le) {
		return &kvrpcpb.KeyError{Locked: lockInfo(&le.Lock)}
	}
	return &kvrpcpb.KeyError{Abort: err.Error()}
}

func (t *tikvServer) down() error {
	if !t.s.storeUp(t.storeID) {
		return errStoreDown(t.storeID)
	}
	return nil
}

// KvGet reads one key at version. (G35)
func (t *tikvServer) KvGet(ctx context.Context, req *kvrpcpb.GetRequest) (*kvrpcpb.GetResponse, error) {
	if err := t.down(); err != nil {
		return nil, err
	}
	if _, re := t.check(req.GetContext(), req.GetKey()); re != nil {
		return &kvrpcpb.GetResponse{RegionError: re}, nil
	}
	v, err := t.s.c.Get(ctx, req.GetKey(), req.GetVersion())
	if err != nil {
		return &kvrpcpb.GetResponse{Error: keyError(err)}, nil
	}
	return &kvrpcpb.GetResponse{Value: v, NotFound: v == nil}, nil
}

// KvBatchGet reads several keys of one region; a lock on one key is
// reported on that pair. (G35)
func (t *tikvServer) KvBatchGet(ctx context.Context, req *kvrpcpb.BatchGetRequest) (*kvrpcpb.BatchGetResponse, error) {
	if err := t.down(); err != nil {
		return nil, err
	}
	if _, re := t.check(req.GetContext(), req.GetKeys()...); re != nil {
		return &kvrpcpb.BatchGetResponse{RegionError: re}, nil
	}
	resp := &kvrpcpb.BatchGetResponse{}
	for _, k := range req.GetKeys() {
		v, err := t.s.c.Get(ctx, k, req.GetVersion())
		switch {
		case err != nil:
			resp.Pairs = append(resp.Pairs, &kvrpcpb.KvPair{Key: k, Error: keyError(err)})
		case v != nil:
			resp.Pairs = append(resp.Pairs, &kvrpcpb.KvPair{Key: k, Value: v})
		}
	}
	return resp, nil
}

// KvScan scans the request range clipped to the region, forward from
// start_key or (reverse) backward from start_key down to end_key. (G36)
func (t *tikvServer) KvScan(ctx context.Context, req *kvrpcpb.ScanRequest) (*kvrpcpb.ScanResponse, error) {
	if err := t.down(); err != nil {
		return nil, err
	}
	sc, re := t.check(req.GetContext())
	if re != nil {
		return &kvrpcpb.ScanResponse{RegionError: re}, nil
	}
	limit := int(req.GetLimit())
	var start, end []byte
	if req.GetReverse() {
		// start_key is the exclusive upper bound, end_key the lower one.
		start, end = sc.clip(req.GetEndKey(), req.GetStartKey())
	} else {
		start, end = sc.clip(req.GetStartKey(), req.GetEndKey())
	}
	scanLimit := limit
	if req.GetReverse() {
		scanLimit = 0
	}
	kvs, err := t.s.c.Scan(ctx, start, end, req.GetVersion(), scanLimit)
	if err != nil {
		return &kvrpcpb.ScanResponse{Error: keyError(err)}, nil
	}
	if req.GetReverse() {
		for i, j := 0, len(kvs)-1; i < j; i, j = i+1, j-1 {
			kvs[i], kvs[j] = kvs[j], kvs[i]
		}
		if limit > 0 && len(kvs) > limit {
			kvs = kvs[:limit]
		}
	}
	// The pairs share one backing array: a snapshot's scans answer
	// thousands of pairs per call, one allocation each would dominate.
	resp := &kvrpcpb.ScanResponse{Pairs: make([]*kvrpcpb.KvPair, len(kvs))}
	pairs := make([]kvrpcpb.KvPair, len(kvs))
	for i, kv := range kvs {
		pairs[i] = kvrpcpb.KvPair{Key: kv.Key, Value: kv.Value}
		if req.GetKeyOnly() {
			pairs[i].Value = nil
		}
		resp.Pairs[i] = &pairs[i]
	}
	return resp, nil
}

// KvScanLock lists locks with start_ts <= max_version in the range clipped
// to the region, in key order, up to limit. (G37)
func (t *tikvServer) KvScanLock(ctx context.Context, req *kvrpcpb.ScanLockRequest) (*kvrpcpb.ScanLockResponse, error) {
	if err := t.down(); err != nil {
		return nil, err
	}
	sc, re := t.check(req.GetContext())
	if re != nil {
		return &kvrpcpb.ScanLockResponse{RegionError: re}, nil
	}
	start, end := sc.clip(req.GetStartKey(), req.GetEndKey())
	locks := t.s.c.ScanLocks(start, end, req.GetMaxVersion())
	if l := int(req.GetLimit()); l > 0 && len(locks) > l {
		locks = locks[:l]
	}
	resp := &kvrpcpb.ScanLockResponse{}
	for i := range locks {
		resp.Locks = append(resp.Locks, lockInfo(&locks[i]))
	}
	return resp, nil
}

// lockOn returns the lock of txn startTs on key, if any.
func (t *tikvServer) lockOn(key []byte, startTs uint64) (mvcc.Lock, bool) {
	for _, l := range t.s.c.ScanLocks(key, append(append([]byte(nil), key...), 0), math.MaxUint64) {
		if bytes.Equal(l.Key, key) && l.StartTs == startTs {
			return l, true
		}
	}
	return mvcc.Lock{}, false
}

// KvCheckTxnStatus decides a txn's fate at its primary: a live lock is
// reported with its TTL (and lock info, which async-commit resolution
// needs), an expired lock is rolled back, a committed txn answers its
// commit ts, and a txn with neither lock nor record is rolled back so it
// can never commit. (G38)
func (t *tikvServer) KvCheckTxnStatus(ctx context.Context, req *kvrpcpb.CheckTxnStatusRequest) (*kvrpcpb.CheckTxnStatusResponse, error) {
	if err := t.down(); err != nil {
		return nil, err
	}
	if _, re := t.check(req.GetContext(), req.GetPrimaryKey()); re != nil {
		return &kvrpcpb.CheckTxnStatusResponse{RegionError: re}, nil
	}
	_, hadLock := t.lockOn(req.GetPrimaryKey(), req.GetLockTs())
	st := t.s.c.CheckTxnStatus(req.GetPrimaryKey(), req.GetLockTs())
	resp := &kvrpcpb.CheckTxnStatusResponse{}
	switch {
	case st.Lock != nil:
		resp.LockTtl = max(st.Lock.TTL, 1)
		resp.LockInfo = lockInfo(st.Lock)
	case st.CommitTs > 0:
		resp.CommitVersion = st.CommitTs
	case st.RolledBack && hadLock:
		resp.Action = kvrpcpb.Action_TTLExpireRollback
	default:
		resp.Action = kvrpcpb.Action_LockNotExistRollback
	}
	return resp, nil
}

// KvCheckSecondaryLocks inspects the keys of an async-commit txn: locks
// still present are returned; a committed key gives the commit ts; a key
// with neither gets a rollback record, which rolls the txn back (commit_ts
// 0 and no locks). (G39)
func (t *tikvServer) KvCheckSecondaryLocks(ctx context.Context, req *kvrpcpb.CheckSecondaryLocksRequest) (*kvrpcpb.CheckSecondaryLocksResponse, error) {
	if err := t.down(); err != nil {
		return nil, err
	}
	if _, re := t.check(req.GetContext(), req.GetKeys()...); re != nil {
		return &kvrpcpb.CheckSecondaryLocksResponse{RegionError: re}, nil
	}
	resp := &kvrpcpb.CheckSecondaryLocksResponse{}
	var locks []*kvrpcpb.LockInfo
	for _, k := range req.GetKeys() {
		if l, ok := t.lockOn(k, req.GetStartVersion()); ok {
			locks = append(locks, lockInfo(&l))
			continue
		}
		// Not locked by the txn: its write record decides (committed or
		// rolled back); with no record a rollback is written.
		st := t.s.c.CheckTxnStatus(k, req.GetStartVersion())
		if st.CommitTs > 0 {
			resp.CommitTs = st.CommitTs
			continue
		}
		return &kvrpcpb.CheckSecondaryLocksResponse{}, nil
	}
	if resp.CommitTs == 0 {
		resp.Locks = locks
	}
	return resp, nil
}

// KvTxnHeartBeat answers the lock's TTL. The fake keeps TTLs fixed (the
// cluster has no TTL update), so the answer is max(current, advised) only
// in what it reports. (G40)
func (t *tikvServer) KvTxnHeartBeat(ctx context.Context, req *kvrpcpb.TxnHeartBeatRequest) (*kvrpcpb.TxnHeartBeatResponse, error) {
	if err := t.down(); err != nil {
		return nil, err
	}
	if _, re := t.check(req.GetContext(), req.GetPrimaryLock()); re != nil {
		return &kvrpcpb.TxnHeartBeatResponse{RegionError: re}, nil
	}
	l, ok := t.lockOn(req.GetPrimaryLock(), req.GetStartVersion())
	if !ok {
		return &kvrpcpb.TxnHeartBeatResponse{Error: &kvrpcpb.KeyError{
			TxnNotFound: &kvrpcpb.TxnNotFound{StartTs: req.GetStartVersion(), PrimaryKey: req.GetPrimaryLock()},
		}}, nil
	}
	return &kvrpcpb.TxnHeartBeatResponse{LockTtl: max(l.TTL, req.GetAdviseLockTtl())}, nil
}

// KvResolveLock finishes transactions inside the region: every lock of
// txn start_version is committed at commit_version (> 0) or rolled back
// (0); txn_infos resolves several txns at once; keys restricts it to those
// keys (client-go's "lite" resolve). (G41)
func (t *tikvServer) KvResolveLock(ctx context.Context, req *kvrpcpb.ResolveLockRequest) (*kvrpcpb.ResolveLockResponse, error) {
	if err := t.down(); err != nil {
		return nil, err
	}
	sc, re := t.check(req.GetContext(), req.GetKeys()...)
	if re != nil {
		return &kvrpcpb.ResolveLockResponse{RegionError: re}, nil
	}
	txns := req.GetTxnInfos()
	if len(txns) == 0 {
		txns = []*kvrpcpb.TxnInfo{{Txn: req.GetStartVersion(), Status: req.GetCommitVersion()}}
	}
	for _, ti := range txns {
		if err := t.resolveTxn(sc, req.GetKeys(), ti.GetTxn(), ti.GetStatus()); err != nil {
			return &kvrpcpb.ResolveLockResponse{Error: &kvrpcpb.KeyError{Abort: err.Error()}}, nil
		}
	}
	return &kvrpcpb.ResolveLockResponse{}, nil
}

func (t *tikvServer) resolveTxn(sc *regionScope, only [][]byte, startTs, commitTs uint64) error {
	var keys [][]byte
	if len(only) > 0 {
		for _, k := range only {
			if _, ok := t.lockOn(k, startTs); ok {
				keys = append(keys, k)
			}
		}
	} else {
		for _, l := range t.s.c.ScanLocks(sc.rawS, sc.rawE, math.MaxUint64) {
			if l.StartTs == startTs {
				keys = append(keys, l.Key)
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	txn := t.s.c.BeginAt(startTs)
	if commitTs > 0 {
		if err := txn.CommitKeys(commitTs, keys...); err != nil {
			return fmt.Errorf("resolve txn %d: commit at %d: %w", startTs, commitTs, err)
		}
		return nil
	}
	for _, k := range keys {
		txn.LockKey(k)
	}
	if err := txn.Rollback(); err != nil {
		return fmt.Errorf("resolve txn %d: rollback: %w", startTs, err)
	}
	return nil
}

// GetStoreSafeTS answers 0: the fake has no follower/stale reads, so no
// safe ts is promised. (G42)
func (t *tikvServer) GetStoreSafeTS(ctx context.Context, req *kvrpcpb.StoreSafeTSRequest) (*kvrpcpb.StoreSafeTSResponse, error) {
	if err := t.down(); err != nil {
		return nil, err
	}
	return &kvrpcpb.StoreSafeTSResponse{}, nil
}

// GetHealthFeedback reports the store as serving. (G42)
func (t *tikvServer) GetHealthFeedback(ctx context.Context, req *kvrpcpb.GetHealthFeedbackRequest) (*kvrpcpb.GetHealthFeedbackResponse, error) {
	if err := t.down(); err != nil {
		return nil, err
	}
	return &kvrpcpb.GetHealthFeedbackResponse{HealthFeedback: &kvrpcpb.HealthFeedback{StoreId: t.storeID}}, nil
}
