package fakeupstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pingcap/kvproto/pkg/cdcpb"

	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/fakeupstream/kvlog"
	"github.com/searchfabric/sfemu/fakeupstream/mvcc"
	"github.com/searchfabric/sfemu/fakeupstream/topology"
	"github.com/searchfabric/sfemu/fakeupstream/tso"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
)

// DefaultStartMs is where the virtual clock starts: a fixed instant
// (2024-01-01T00:00:00Z) so timestamps look realistic and runs repeat.
const DefaultStartMs int64 = 1704067200000

// Config describes a fake cluster. Zero fields take defaults.
type Config struct {
	// Seed drives every random choice (feed delivery order).
	Seed int64
	// Stores is the number of TiKV stores (default 3).
	Stores int
	// Replicas per region (default min(3, Stores)).
	Replicas int
	// StartMs is the virtual clock's start (default DefaultStartMs).
	StartMs int64
	// RealClock uses the wall clock for TSO and resolved-ts ticks (demo);
	// Advance is then an error.
	RealClock bool
	// LockTTLMs is the TTL of locks written by Txn (default 3000).
	LockTTLMs uint64
	// Feed tunes the CDC feed; its Seed is taken from Seed.
	Feed cdcfeed.Config
	// Dir, when set, makes the cluster durable: every committed change is
	// logged there (fakeupstream/kvlog) and fsynced before the commit
	// returns, and New on the same Dir restores the committed state and a
	// TSO that only moves forward (specs/fakeupstream-cluster.md §9).
	// Empty: in memory only (deterministic tests pay nothing).
	Dir string
	// Clock, when set, is the TSO's physical clock (it overrides
	// RealClock; Advance then works only if it is a *tso.VirtualClock).
	Clock tso.Clock
	// Maintain tunes the background GC and log compaction of a durable
	// cluster (DUR-11, DUR-12).
	Maintain MaintainConfig
}

// Cluster is an in-process TiKV-style cluster: TSO, Percolator MVCC,
// regions on stores, and the CDC feed. All methods are safe for concurrent
// use; one mutex serialises the deterministic core.
type Cluster struct {
	mu     sync.Mutex
	cfg    Config
	vclock *tso.VirtualClock
	clock  tso.Clock
	oracle *tso.Oracle
	store  *mvcc.Store
	topo   *topology.Topology
	feed   *cdcfeed.Feed
	// scratch is an encode buffer used under mu.
	scratch []byte
	// log is the durable log (nil in memory); restored tells what reopen
	// found.
	log      *kvlog.Log
	restored RestoreStats
	closeMu  sync.Mutex
	closed   bool
	// meta holds named values of components beside the store (SaveMeta).
	meta map[string][]byte

	// Background GC and compaction (compact.go): one compaction at a
	// time; the log size after the last one; the GC policy; the loop's
	// last error and its stop.
	compactMu      sync.Mutex
	compactHook    func() // tests: runs between chunks of a compaction
	compactChunk   int    // tests: keys per chunk (0: compactChunkKeys)
	compacted      int64
	compactions    int
	lastCompact    CompactStats
	gcPolicy       GCPolicy
	maintainErr    error
	maintainCancel context.CancelFunc
	maintainDone   chan struct{}
}

// RestoreStats describes the state a durable cluster found in its Dir.
type RestoreStats struct {
	// Records replayed from the log, and its size after recovery.
	Records int
	Size    int64
	// TornBytes were dropped from the log's end (an unacknowledged,
	// incomplete last record).
	TornBytes int64
	// TSOLimit is the persisted TSO high-water mark every new ts exceeds.
	TSOLimit uint64
}

// New builds a cluster with one region covering the key space.
func New(cfg Config) (*Cluster, error) {
	if cfg.Stores == 0 {
		cfg.Stores = 3
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = min(3, cfg.Stores)
	}
	if cfg.StartMs == 0 {
		cfg.StartMs = DefaultStartMs
	}
	if cfg.LockTTLMs == 0 {
		cfg.LockTTLMs = 3000
	}
	topo, err := topology.New(cfg.Stores, cfg.Replicas)
	if err != nil {
		return nil, fmt.Errorf("fakeupstream: %w", err)
	}
	c := &Cluster{cfg: cfg, topo: topo, meta: map[string][]byte{}}
	switch {
	case cfg.Clock != nil:
		c.clock = cfg.Clock
		c.vclock, _ = cfg.Clock.(*tso.VirtualClock)
	case cfg.RealClock:
		c.clock = tso.WallClock{}
	default:
		c.vclock = tso.NewVirtualClock(cfg.StartMs)
		c.clock = c.vclock
	}
	c.oracle = tso.NewOracle(c.clock)
	c.store = mvcc.New(nil)
	var feedMu sync.Locker = &c.mu
	if cfg.Dir != "" {
		if err := c.openLog(); err != nil {
			return nil, err
		}
		feedMu = durableLocker{c}
	}
	fc := cfg.Feed
	fc.Seed = cfg.Seed
	c.feed = cdcfeed.New(feedMu, cdcfeed.Backend{Store: c.store, Topo: topo, Oracle: c.oracle, Clock: c.clock}, fc)
	c.store.SetObserver(c.feed.OnChange)
	if c.log != nil {
		c.startMaintenance()
	}
	return c, nil
}

// ---- time ----

// Oracle is the cluster's TSO (it implements kvevent.Clock).
func (c *Cluster) Oracle() *tso.Oracle { return c.oracle }

// CurrentTs implements kvevent.Clock: a fresh TSO timestamp.
func (c *Cluster) CurrentTs(ctx context.Context) (uint64, error) { return c.oracle.CurrentTs(ctx) }

// NowMs is the cluster clock in Unix milliseconds.
func (c *Cluster) NowMs() int64 { return c.clock.NowMs() }

// ErrRealClock: Advance was called on a wall-clock cluster.
var ErrRealClock = errors.New("fakeupstream: the cluster runs on the wall clock; virtual time cannot be advanced")

// Advance moves virtual time forward by d and runs a resolved-ts round if
// an interval has passed.
func (c *Cluster) Advance(d time.Duration) error {
	if c.vclock == nil {
		return ErrRealClock
	}
	c.vclock.Advance(d)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.feed.Tick()
	return nil
}

// Tick runs a resolved-ts round if an interval has passed on the clock
// (the real-time driver calls it periodically).
func (c *Cluster) Tick() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.feed.Tick()
}

// ResolvedRound runs a resolved-ts round now, regardless of the interval.
func (c *Cluster) ResolvedRound() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.feed.ResolvedRound()
}

// ---- snapshot reads (kvevent.SnapshotReader) ----

var _ kvevent.SnapshotReader = (*Cluster)(nil)
var _ kvevent.Clock = (*Cluster)(nil)

// Get returns the committed value of raw key at ts (nil when absent). A
// lock at or below ts fails with *mvcc.LockedError; ts below the GC safe
// point fails with *mvcc.GCTooEarlyError.
func (c *Cluster) Get(ctx context.Context, key []byte, ts uint64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	v, err := c.store.Get(key, ts)
	v = cloneBytes(v)
	lsn := c.lsnLocked()
	c.mu.Unlock()
	if err := c.persist(lsn); err != nil {
		return nil, err
	}
	return v, err
}

// Scan returns up to limit (<= 0: all) committed pairs of [start, end) at
// ts (raw keys; nil end = +inf), in key order. Keys and values are copies.
func (c *Cluster) Scan(ctx context.Context, start, end []byte, ts uint64, limit int) ([]kvevent.KV, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	kvs, err := c.store.Scan(start, end, ts, limit)
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	out := make([]kvevent.KV, len(kvs))
	for i, kv := range kvs {
		out[i] = kvevent.KV{Key: cloneBytes(kv.Key), Value: cloneBytes(kv.Value)}
	}
	lsn := c.lsnLocked()
	c.mu.Unlock()
	if err := c.persist(lsn); err != nil {
		return nil, err
	}
	return out, nil
}

// GCSafePoint implements kvevent.SnapshotReader.
func (c *Cluster) GCSafePoint(ctx context.Context) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.store.GCSafePoint(), nil
}

// GC raises the GC safe point to sp and drops versions below it.
// With a Dir the new safe point is logged (best effort: a lost GC record
// only means the older versions come back after a restart).
func (c *Cluster) GC(sp uint64) {
	c.mu.Lock()
	c.store.GC(sp)
	lsn := c.lsnLocked()
	c.mu.Unlock()
	_ = c.persist(lsn)
}

// ---- locks ----

// ScanLocks lists locks with start_ts <= maxTs in raw [start, end).
func (c *Cluster) ScanLocks(start, end []byte, maxTs uint64) []mvcc.Lock {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.store.ScanLocks(start, end, maxTs, 0)
}

// CheckTxnStatus asks the primary key for the fate of txn lockTs at the
// current TSO (rolling back an expired lock, as TiKV does).
func (c *Cluster) CheckTxnStatus(primary []byte, lockTs uint64) mvcc.TxnStatus {
	now := c.oracle.Next()
	c.mu.Lock()
	st := c.store.CheckTxnStatus(primary, lockTs, now)
	lsn := c.lsnLocked()
	c.mu.Unlock()
	// A log failure is sticky: every later commit fails with it.
	_ = c.persist(lsn)
	return st
}

// ResolveLocks is the lock resolver TiCDC runs for a stuck region: for
// every txn holding a lock with start_ts <= maxTs in raw [start, end), it
// checks the txn's primary and commits or rolls back its locks; txns still
// alive (TTL not expired) are left alone. Async-commit txns are decided by
// their secondaries. It returns the number of locks found in the range
// whose txn it finished.
func (c *Cluster) ResolveLocks(start, end []byte, maxTs uint64) (int, error) {
	now := c.oracle.Next()
	c.mu.Lock()
	n, err := c.resolveLocksLocked(start, end, maxTs, now)
	lsn := c.lsnLocked()
	c.mu.Unlock()
	if perr := c.persist(lsn); perr != nil && err == nil {
		return 0, perr
	}
	return n, err
}

func (c *Cluster) resolveLocksLocked(start, end []byte, maxTs, now uint64) (int, error) {
	locks := c.store.ScanLocks(start, end, maxTs, 0)
	perTxn := map[uint64]int{}
	for _, l := range locks {
		perTxn[l.StartTs]++
	}
	done := map[uint64]bool{}
	total := 0
	for _, l := range locks {
		if done[l.StartTs] {
			continue
		}
		done[l.StartTs] = true
		st := c.store.CheckTxnStatus(l.Primary, l.StartTs, now)
		commitTs := st.CommitTs
		switch {
		case st.Lock != nil && st.Lock.UseAsyncCommit:
			sec := c.store.CheckSecondaryLocks(st.Lock.Secondaries, l.StartTs)
			switch {
			case sec.CommitTs > 0:
				commitTs = sec.CommitTs
			case sec.RolledBack:
				c.store.Rollback([][]byte{st.Lock.Key}, l.StartTs)
			default:
				commitTs = st.Lock.MinCommitTs
				for _, s := range sec.Locks {
					commitTs = max(commitTs, s.MinCommitTs)
				}
			}
		case st.Lock != nil:
			continue // alive
		}
		if _, err := c.store.ResolveLock(nil, nil, l.StartTs, commitTs); err != nil {
			return total, fmt.Errorf("fakeupstream: resolve txn %d: %w", l.StartTs, err)
		}
		total += perTxn[l.StartTs]
	}
	return total, nil
}

// ---- topology ----

// Regions returns the regions in key order.
func (c *Cluster) Regions() []topology.Region {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.topo.Regions()
}

// Region returns region id.
func (c *Cluster) Region(id uint64) (topology.Region, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.topo.Region(id)
}

// RegionsInSpan returns the regions intersecting a comparable span, as a
// PD region-cache lookup does.
func (c *Cluster) RegionsInSpan(span kvevent.Span) []topology.Region {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.topo.Overlapping(span.StartKey, span.EndKey)
}

// LocateRaw returns the region holding raw key k.
func (c *Cluster) LocateRaw(k []byte) topology.Region {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.topo.Locate(codec.EncodeBytes(nil, k))
}

// Stores lists the stores.
func (c *Cluster) Stores() []topology.Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.topo.Stores()
}

// SplitRaw splits the region holding raw key k at EncodeBytes(k) (the
// boundary TiDB would ask PD for). The left part gets a new id. A durable
// cluster logs the new layout before returning (DUR-9).
func (c *Cluster) SplitRaw(k []byte) (left, right topology.Region, err error) {
	c.mu.Lock()
	ck := codec.EncodeBytes(nil, k)
	id := c.topo.LocateID(ck)
	left, right, err = c.topo.Split(id, ck)
	if err != nil {
		c.mu.Unlock()
		return left, right, fmt.Errorf("fakeupstream: %w", err)
	}
	c.feed.OnRegionChange(id, cdcfeed.SplitOrMerge)
	lsn := c.logRegionsLocked()
	c.mu.Unlock()
	return left, right, c.persist(lsn)
}

// Merge folds region source into its neighbour target.
func (c *Cluster) Merge(source, target uint64) (topology.Region, error) {
	c.mu.Lock()
	r, err := c.topo.Merge(source, target)
	if err != nil {
		c.mu.Unlock()
		return r, fmt.Errorf("fakeupstream: %w", err)
	}
	c.feed.OnRegionChange(source, cdcfeed.SplitOrMerge)
	c.feed.OnRegionChange(target, cdcfeed.SplitOrMerge)
	lsn := c.logRegionsLocked()
	c.mu.Unlock()
	return r, c.persist(lsn)
}

// TransferLeader moves region id's leader to store.
func (c *Cluster) TransferLeader(id, store uint64) error {
	c.mu.Lock()
	r, ok := c.topo.Region(id)
	if err := c.topo.TransferLeader(id, store); err != nil {
		c.mu.Unlock()
		return fmt.Errorf("fakeupstream: %w", err)
	}
	if ok && r.Leader != store {
		c.feed.OnRegionChange(id, cdcfeed.LeaderMoved)
	}
	lsn := c.logRegionsLocked()
	c.mu.Unlock()
	return c.persist(lsn)
}

// AddPeer adds a replica of region id on store (conf_ver+1).
func (c *Cluster) AddPeer(id, store uint64) error {
	c.mu.Lock()
	if err := c.topo.AddPeer(id, store); err != nil {
		c.mu.Unlock()
		return err
	}
	lsn := c.logRegionsLocked()
	c.mu.Unlock()
	return c.persist(lsn)
}

// RemovePeer removes the replica of region id on store (conf_ver+1).
func (c *Cluster) RemovePeer(id, store uint64) error {
	c.mu.Lock()
	if err := c.topo.RemovePeer(id, store); err != nil {
		c.mu.Unlock()
		return err
	}
	lsn := c.logRegionsLocked()
	c.mu.Unlock()
	return c.persist(lsn)
}

// StoreDown takes a store down: its CDC streams break and its leaders move
// to the lowest up peer.
func (c *Cluster) StoreDown(store uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	moved, err := c.topo.SetStoreUp(store, false)
	if err != nil {
		return fmt.Errorf("fakeupstream: %w", err)
	}
	c.feed.OnStoreDown(store)
	for _, id := range moved {
		c.feed.OnRegionChange(id, cdcfeed.LeaderMoved)
	}
	return nil
}

// StoreUp brings a store back; leaderless regions with a peer there elect
// it.
func (c *Cluster) StoreUp(store uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.topo.SetStoreUp(store, true); err != nil {
		return fmt.Errorf("fakeupstream: %w", err)
	}
	return nil
}

// CheckTopology verifies the region invariants (coverage, no overlap).
func (c *Cluster) CheckTopology() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.topo.Check()
}

// ---- CDC feed ----

// OpenStream opens a change-data stream to store.
func (c *Cluster) OpenStream(store uint64) (*cdcfeed.Stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.feed.Open(store)
}

// Step delivers one batch of one ready subscription.
func (c *Cluster) Step() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.feed.Step()
}

// DeliverAll steps until nothing is ready.
func (c *Cluster) DeliverAll() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.feed.DeliverAll()
}

// FeedPending reports whether any subscription has undelivered output.
func (c *Cluster) FeedPending() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.feed.Pending()
}

// SetFeedTap installs an observer of every delivered message.
func (c *Cluster) SetFeedTap(t cdcfeed.Tap) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.feed.SetTap(t)
}

// ---- fault hooks ----

// HoldRegion delays region id's deliveries for d of cluster time (d <= 0:
// until ReleaseRegion); other regions overtake it.
func (c *Cluster) HoldRegion(id uint64, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	until := int64(1<<63 - 1)
	if d > 0 {
		until = c.clock.NowMs() + d.Milliseconds()
	}
	c.feed.Hold(id, until)
}

// ReleaseRegion lifts HoldRegion.
func (c *Cluster) ReleaseRegion(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.feed.Release(id)
}

// DropStreams breaks every open stream to store (a network failure; the
// store stays up).
func (c *Cluster) DropStreams(store uint64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.feed.Streams() {
		if s.StoreID() == store {
			c.feed.DropStream(s)
			n++
		}
	}
	return n
}

// DuplicateWindow re-sends the last n rows delivered for region id (see
// cdcfeed.Feed.DuplicateWindow).
func (c *Cluster) DuplicateWindow(id uint64, n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.feed.DuplicateWindow(id, n)
}

// FailRegion ends region id's subscriptions with a chosen region error
// (server_is_busy, congested, unknown...); see cdcfeed.Feed.FailRegion.
func (c *Cluster) FailRegion(id uint64, e *cdcpb.Error) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.feed.FailRegion(id, e)
}

// InjectRows queues raw rows (protocol violations included) to the live
// subscriptions of region id; see cdcfeed.Feed.InjectRows.
func (c *Cluster) InjectRows(id uint64, rows ...*cdcpb.Event_Row) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.feed.InjectRows(id, rows...)
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
