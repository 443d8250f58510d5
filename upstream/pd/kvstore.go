package pd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	tikverr "github.com/tikv/client-go/v2/error"
	"github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/tikvrpc"
	"github.com/tikv/client-go/v2/txnkv"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/logpuller"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
)

// scanLockLimit is the page size of ScanLock (TiCDC's value).
const scanLockLimit = 1024

// KVStore is client-go's transactional KV store: snapshot reads of raw keys
// (the schema store's initial meta snapshot) and the lock resolver. Its
// region cache uses a codec PD client, so keys here are RAW (facts §4).
type KVStore struct {
	pd    *Client
	store *tikv.KVStore
}

// OpenKVStore opens client-go's KV store over c (API v1, transactional
// mode). Close it when done; it does not close c.
//
// client-go reads the txn safe point through PD's GC states API (PD >= 9.0)
// and otherwise straight from PD's embedded etcd: when PD answers the GC
// states call with Unimplemented, the store is given an etcd safe-point KV
// at the PD endpoints (P12).
func OpenKVStore(c *Client) (*KVStore, error) {
	codecPD := tikv.NewCodecPDClient(tikv.ModeTxn, c.pd)
	var spkv tikv.SafePointKV = tikv.NewMockSafePointKV()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	_, gcErr := c.pd.GetGCStatesClient(0).GetGCState(ctx)
	cancel()
	if status.Code(gcErr) == codes.Unimplemented && len(c.endpoints) > 0 {
		etcd, err := tikv.NewEtcdSafePointKV(c.endpoints, c.tlsConfig)
		if err != nil {
			return nil, fmt.Errorf("pd: open KV store: etcd safe point KV at %v: %w", c.endpoints, err)
		}
		spkv = etcd
	}
	// NewKVStore takes a first timestamp through the PD client; right after
	// the client connects, its TSO stream may still be (re)created and
	// answer Canceled or Unavailable although nothing was cancelled. That is
	// retried a few times within the PD timeout; any other error is not.
	deadline := time.Now().Add(c.timeout)
	for attempt := 1; ; attempt++ {
		st, err := tikv.NewKVStore(fmt.Sprintf("sfemu-%d", c.clusterID), codecPD, spkv, tikv.NewRPCClient(tikv.WithSecurity(c.security.clientGo())))
		if err == nil {
			return &KVStore{pd: c, store: st}, nil
		}
		if !transientOpenError(err) || attempt >= openKVAttempts || time.Now().After(deadline) {
			return nil, fmt.Errorf("pd: open KV store (attempt %d): %w", attempt, err)
		}
		time.Sleep(time.Duration(attempt) * 50 * time.Millisecond)
	}
}

// openKVAttempts bounds OpenKVStore's retries of a transient first TSO.
const openKVAttempts = 5

// transientOpenError: the PD client's TSO stream was being set up.
func transientOpenError(err error) bool {
	switch status.Code(err) {
	case codes.Canceled, codes.Unavailable:
		return true
	}
	// The PD client also fails requests it had in flight with a bare
	// context.Canceled when it re-creates its TSO stream (its own context,
	// not the caller's: OpenKVStore has none).
	msg := err.Error()
	return errors.Is(err, context.Canceled) || strings.Contains(msg, "context canceled") ||
		strings.Contains(msg, "code = Canceled") || strings.Contains(msg, "code = Unavailable")
}

// Close closes the KV store.
func (k *KVStore) Close() error { return k.store.Close() }

var (
	_ kvevent.SnapshotReader = (*KVStore)(nil)
	_ logpuller.LockResolver = (*KVStore)(nil)
)

// Get reads key at ts; nil when absent (P10).
func (k *KVStore) Get(ctx context.Context, key []byte, ts uint64) ([]byte, error) {
	v, err := k.store.GetSnapshot(ts).Get(ctx, key)
	if tikverr.IsErrNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pd: snapshot get %x at %d: %w", key, ts, err)
	}
	return v.Value, nil
}

// maxScanBatch caps one KvScan's pairs (its response stays a few MiB).
const maxScanBatch = 8192

// Scan reads up to limit pairs of [start, end) at ts in key order (limit
// <= 0: no limit) (P10). A ts below the GC safe point is refused first,
// naming both, rather than reading a partly collected snapshot.
func (k *KVStore) Scan(ctx context.Context, start, end []byte, ts uint64, limit int) ([]kvevent.KV, error) {
	if err := CheckStartTs(ctx, k.pd.pd, ts); err != nil {
		return nil, err
	}
	snap := k.store.GetSnapshot(ts)
	if limit > 0 {
		// One KvScan per region part of the call instead of one per 256
		// pairs (client-go's default batch): the snapshot reads chunks of
		// thousands of rows (SN4).
		snap.SetScanBatchSize(min(limit, maxScanBatch))
	}
	it, err := snap.Iter(start, end)
	if err != nil {
		return nil, fmt.Errorf("pd: snapshot scan [%x, %x) at %d: %w", start, end, ts, err)
	}
	defer it.Close()
	out := make([]kvevent.KV, 0, max(min(limit, maxScanBatch), 0))
	for it.Valid() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// The pairs are the scan response's own: every KvScan answer is
		// a new message whose keys and values were copied out of the
		// receive buffer when it was decoded, and the iterator never
		// writes them, so they are handed on without a copy.
		out = append(out, kvevent.KV{Key: it.Key(), Value: it.Value()})
		if limit > 0 && len(out) >= limit {
			break // no Next: it would fetch a batch past the limit
		}
		if err := it.Next(); err != nil {
			return nil, fmt.Errorf("pd: snapshot scan [%x, %x) at %d after %x: %w", start, end, ts, it.Key(), err)
		}
	}
	return out, nil
}

// GCSafePoint returns the cluster's GC safe point bound (P3).
func (k *KVStore) GCSafePoint(ctx context.Context) (uint64, error) { return GCSafePoint(ctx, k.pd.pd) }

// ResolveLocks scans the locks of the task's region with start ts below
// the target and hands them to client-go's lock resolver, which checks each
// transaction's status and commits or rolls back its locks (P11, facts §3).
// The whole region is scanned, as TiCDC does, not only the part the span
// covers: TiKV's resolved ts of a region waits for every lock in it, so a
// lock of another table sharing the region stalls the span just the same
// (P13). When the region id is no longer known (split or merged since),
// the task's span is scanned instead. The span is comparable; region
// lookups here use raw keys.
func (k *KVStore) ResolveLocks(ctx context.Context, task logpuller.LockResolveTask) error {
	start, end, err := rawRange(task.Span)
	if err != nil {
		return fmt.Errorf("pd: resolve locks of region %d: %w", task.RegionID, err)
	}
	bo := tikv.NewGcResolveLockMaxBackoffer(ctx)
	if loc, err := k.store.GetRegionCache().LocateRegionByID(bo, task.RegionID); err == nil && loc != nil &&
		bytes.Compare(loc.StartKey, start) <= 0 && (len(loc.EndKey) == 0 || (len(end) > 0 && bytes.Compare(end, loc.EndKey) <= 0)) {
		// The region still holds the span: widen to all of it.
		start, end = loc.StartKey, loc.EndKey
	}
	key := start
	for {
		loc, err := k.store.GetRegionCache().LocateKey(bo, key)
		if err != nil {
			return fmt.Errorf("pd: resolve locks: locate %x: %w", key, err)
		}
		reqEnd := loc.EndKey
		if len(end) > 0 && (len(reqEnd) == 0 || bytes.Compare(end, reqEnd) < 0) {
			reqEnd = end
		}
		req := tikvrpc.NewRequest(tikvrpc.CmdScanLock, &kvrpcpb.ScanLockRequest{
			MaxVersion: task.TargetTs, Limit: scanLockLimit, StartKey: key, EndKey: reqEnd,
		})
		resp, err := k.store.SendReq(bo, req, loc.Region, tikv.ReadTimeoutMedium)
		if err != nil {
			return fmt.Errorf("pd: scan locks at %x: %w", key, err)
		}
		regionErr, err := resp.GetRegionError()
		if err != nil {
			return fmt.Errorf("pd: scan locks at %x: %w", key, err)
		}
		if regionErr != nil {
			if err := bo.Backoff(tikv.BoRegionMiss(), errors.New(regionErr.String())); err != nil {
				return fmt.Errorf("pd: scan locks at %x: %w", key, err)
			}
			continue
		}
		lr, ok := resp.Resp.(*kvrpcpb.ScanLockResponse)
		if !ok || lr == nil {
			return fmt.Errorf("pd: scan locks at %x: empty response", key)
		}
		if lr.GetError() != nil {
			return fmt.Errorf("pd: scan locks at %x: %s", key, lr.GetError())
		}
		locks := make([]*txnkv.Lock, 0, len(lr.Locks))
		for _, l := range lr.Locks {
			locks = append(locks, txnkv.NewLock(l))
		}
		if len(locks) > 0 {
			if _, err := k.store.GetLockResolver().ResolveLocks(bo, 0, locks); err != nil {
				return fmt.Errorf("pd: resolve %d locks of region %d: %w", len(locks), task.RegionID, err)
			}
		}
		if len(lr.Locks) == scanLockLimit {
			// A full page: continue right after the last lock.
			key = append(bytes.Clone(lr.Locks[len(lr.Locks)-1].Key), 0)
			continue
		}
		key = loc.EndKey
		if len(key) == 0 || (len(end) > 0 && bytes.Compare(key, end) >= 0) {
			return nil
		}
	}
}

// rawRange decodes a comparable span into raw bounds (end nil = +inf).
func rawRange(span kvevent.Span) (start, end []byte, err error) {
	if len(span.StartKey) > 0 {
		if _, start, err = codec.DecodeBytes(span.StartKey, nil); err != nil {
			return nil, nil, fmt.Errorf("start key %x is not comparable: %w", span.StartKey, err)
		}
	}
	if len(span.EndKey) > 0 {
		if _, end, err = codec.DecodeBytes(span.EndKey, nil); err != nil {
			return nil, nil, fmt.Errorf("end key %x is not comparable: %w", span.EndKey, err)
		}
	}
	return start, end, nil
}
