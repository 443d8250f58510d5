package fakeupstream

// Background GC and log compaction of a durable cluster (DUR-11, DUR-12):
// the safe point is raised to what the GC policy allows, old versions are
// swept key range by key range, and once the log has grown well past the
// live state it is rewritten from the store while writers go on.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream/kvlog"
)

// Defaults of the background maintenance of a durable cluster.
const (
	// DefaultMaintainInterval is how often the maintenance loop looks at
	// the GC policy and the log size.
	DefaultMaintainInterval = 10 * time.Second
	// DefaultCompactMinBytes: a log smaller than this is never compacted.
	DefaultCompactMinBytes = 32 << 20
	// compactChunkKeys is the number of keys copied or swept per hold of
	// the cluster lock: a writer waits at most for one chunk.
	compactChunkKeys = 2048
)

// MaintainConfig tunes the background GC and compaction of a durable
// cluster (Config.Maintain). Zero fields take the defaults.
type MaintainConfig struct {
	// Off disables the background loop (Compact and GC still work).
	Off bool
	// Interval between two looks (default DefaultMaintainInterval).
	Interval time.Duration
	// MinBytes: the log is compacted once it is at least MinBytes and
	// Growth times its size after the previous compaction (or at open)
	// (default DefaultCompactMinBytes).
	MinBytes int64
	// Growth is that factor (default DefaultCompactGrowth; values <= 1
	// take the default): disk use stays below Growth times the live
	// state plus the GC window.
	Growth float64
}

// DefaultCompactGrowth: the log is compacted once it doubled.
const DefaultCompactGrowth = 2.0

// GCPolicy answers the GC safe point the cluster may move to now (0: no
// GC). The fake PD installs one that honours the service safe points
// (G28); without one the background loop only compacts.
type GCPolicy func(nowTs uint64) uint64

// SetCompactGrowth changes MaintainConfig.Growth from the next round on
// (values <= 1 take DefaultCompactGrowth): a bulk load runs with the
// default, then a soak lowers it so its window shows a compaction.
func (c *Cluster) SetCompactGrowth(g float64) {
	if g <= 1 {
		g = DefaultCompactGrowth
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cfg.Maintain.Growth = g
}

// SetGCPolicy installs the background GC's policy (nil: none).
func (c *Cluster) SetGCPolicy(p GCPolicy) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gcPolicy = p
}

// CompactStats describes one compaction.
type CompactStats struct {
	// Before and After are the log's sizes; Keys the keys copied.
	Before, After int64
	Keys          int
	Took          time.Duration
}

// LogSize is the size of the durable log (0 in memory): what the
// embedded upstream occupies on disk.
func (c *Cluster) LogSize() int64 {
	if c.log == nil {
		return 0
	}
	return c.log.Size()
}

// Compactions is the number of compactions done since New and the last
// one's figures.
func (c *Cluster) Compactions() (int, CompactStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.compactions, c.lastCompact
}

// LogSyncs is the number of fsyncs of the durable log so far (0 in
// memory): commits per fsync show how much group commit shares.
func (c *Cluster) LogSyncs() int64 {
	if c.log == nil {
		return 0
	}
	return c.log.Syncs()
}

// LogPending reports whether changes applied to the store are not yet on
// disk (false in memory).
func (c *Cluster) LogPending() bool {
	return c.log != nil && c.log.Pending()
}

// Compact rewrites the log from the live state (DUR-11): versions below
// the GC safe point are dropped (the store is swept as it is copied),
// lock/unlock pairs, superseded TSO marks, region layouts and meta values
// disappear. Writers are held for one chunk of keys at a time; a change
// made meanwhile reaches the new file either with its key's chunk or, for
// a key already copied, appended to it as well. A crash at any point
// leaves the old or the new log, both complete. In memory it does
// nothing.
func (c *Cluster) Compact() (CompactStats, error) {
	var st CompactStats
	if c.log == nil {
		return st, nil
	}
	c.compactMu.Lock()
	defer c.compactMu.Unlock()
	start := time.Now()
	st.Before = c.log.Size()
	cp, err := c.log.BeginCompaction()
	if err != nil {
		return st, c.logErr("compact", err)
	}
	var enc kvlog.Encoder
	var after []byte
	for first := true; ; first = false {
		c.mu.Lock()
		enc.B = enc.B[:0]
		last, n, done := c.store.SnapshotChunk(after, first, c.chunkKeys(), &enc)
		cp.AddChunk(last, n, enc.B, done)
		if n > 0 {
			after = append(after[:0], last...)
		}
		c.mu.Unlock()
		st.Keys += n
		if err := cp.Write(); err != nil {
			cp.Abort()
			return st, c.logErr("compact", err)
		}
		if c.compactHook != nil {
			c.compactHook()
		}
		if done {
			break
		}
	}
	size, err := cp.Finish()
	if err != nil {
		return st, c.logErr("compact", err)
	}
	st.After, st.Took = size, time.Since(start)
	c.mu.Lock()
	c.compacted = size
	c.compactions++
	c.lastCompact = st
	c.mu.Unlock()
	return st, nil
}

// sweep drops the versions below the safe point chunk by chunk (the
// background GC's pass when the log is not due for a compaction).
func (c *Cluster) sweep(ctx context.Context) {
	var after []byte
	for first := true; ctx.Err() == nil; first = false {
		c.mu.Lock()
		last, done := c.store.SweepChunk(after, first, c.chunkKeys())
		after = append(after[:0], last...)
		c.mu.Unlock()
		if done {
			return
		}
	}
}

func (c *Cluster) logErr(what string, err error) error {
	if errors.Is(err, kvlog.ErrClosed) {
		return ErrClosed
	}
	return fmt.Errorf("fakeupstream: %s %s: %w", what, c.cfg.Dir, err)
}

// maintainOnce is one round of the background loop: GC as far as the
// policy allows (raising the safe point, then sweeping or compacting),
// and compaction once the log is due.
func (c *Cluster) maintainOnce(ctx context.Context) error {
	c.mu.Lock()
	policy, base, growth := c.gcPolicy, c.compacted, c.cfg.Maintain.Growth
	c.mu.Unlock()
	raised := false
	if policy != nil {
		now := c.oracle.Next()
		if sp := policy(now); sp > 0 && sp < now {
			c.mu.Lock()
			raised = c.store.RaiseSafePoint(sp)
			lsn := c.lsnLocked()
			c.mu.Unlock()
			if err := c.persist(lsn); err != nil {
				return err
			}
		}
	}
	size := c.log.Size()
	if size >= c.cfg.Maintain.MinBytes && float64(size) >= growth*float64(base) {
		_, err := c.Compact()
		return err
	}
	if raised {
		c.sweep(ctx)
	}
	return nil
}

// maintain is the background loop of a durable cluster; Close stops it.
func (c *Cluster) maintain(ctx context.Context) {
	defer close(c.maintainDone)
	t := time.NewTicker(c.cfg.Maintain.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := c.maintainOnce(ctx); err != nil {
			c.mu.Lock()
			c.maintainErr = err
			c.mu.Unlock()
			if errors.Is(err, ErrClosed) {
				return
			}
		}
	}
}

// MaintainErr is the last error of the background GC and compaction (nil:
// none). A failed compaction leaves the old log in use.
func (c *Cluster) MaintainErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.maintainErr
}

func (c *Cluster) chunkKeys() int {
	if c.compactChunk > 0 {
		return c.compactChunk
	}
	return compactChunkKeys
}

// RunMaintenance runs one round of the background GC and compaction now
// (what the loop does every MaintainConfig.Interval): tests and tools call
// it to get the effect at a chosen point. In memory it does nothing.
func (c *Cluster) RunMaintenance() error {
	if c.log == nil {
		return nil
	}
	return c.maintainOnce(context.Background())
}
