package fakeupstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/searchfabric/sfemu/fakeupstream/kvlog"
	"github.com/searchfabric/sfemu/fakeupstream/topology"
	"github.com/searchfabric/sfemu/fakeupstream/tso"
)

// ErrClosed: the cluster was closed.
var ErrClosed = errors.New("fakeupstream: cluster is closed")

// openLog replays Config.Dir's log into the (empty) store, sets the TSO
// above everything persisted and starts journaling. Called by New before
// the feed observes the store, so replay produces no CDC events.
func (c *Cluster) openLog() error {
	var mark, nextID uint64
	var regions []topology.Region
	log, st, err := kvlog.Open(c.cfg.Dir, func(_ int64, r kvlog.Record) error {
		switch r.Type {
		case kvlog.TypeWrite:
			return c.store.RestoreWrite(r.Key, r.Write, r.Unlock)
		case kvlog.TypeLock:
			return c.store.RestoreLock(r.Lock)
		case kvlog.TypeDelLock:
			return c.store.RestoreDelLock(r.Key, r.StartTs)
		case kvlog.TypeGC:
			c.store.GC(r.Ts)
		case kvlog.TypeTSO:
			mark = max(mark, r.Ts)
		case kvlog.TypeMeta:
			c.meta[string(r.Key)] = append([]byte(nil), r.Write.Value...)
		case kvlog.TypeRegions:
			// The last layout wins; copy it out of the read buffer.
			regions, nextID = regions[:0], r.Ts
			for _, g := range r.Regions {
				regions = append(regions, topology.Region{
					ID: g.ID, StartKey: append([]byte(nil), g.StartKey...), EndKey: append([]byte(nil), g.EndKey...),
					ConfVer: g.ConfVer, Version: g.Version, Leader: g.Leader, Peers: append([]topology.Peer(nil), g.Peers...),
				})
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fakeupstream: open %s: %w", c.cfg.Dir, err)
	}
	if regions != nil {
		if err := c.topo.Restore(regions, nextID); err != nil {
			log.Close()
			return fmt.Errorf("fakeupstream: open %s: the logged region layout: %w", c.cfg.Dir, err)
		}
	}
	hw := max(mark, c.store.MaxTs())
	// A virtual clock resumes at the high-water mark, so lock TTLs and
	// resolved-ts intervals keep counting from there (an injected clock
	// is left alone: the oracle alone guards monotonicity).
	if c.vclock != nil && c.cfg.Clock == nil && hw > 0 {
		c.vclock.Set(tso.Physical(hw))
	}
	c.oracle.SetWindow(hw, tso.DefaultWindowMs, log.SaveTSO)
	c.store.SetJournal(log)
	c.log = log
	c.restored = RestoreStats{Records: st.Records, Size: st.Size, TornBytes: st.TornBytes, TSOLimit: hw}
	return nil
}

// startMaintenance starts the background GC and compaction loop of a
// durable cluster (unless Config.Maintain.Off); Close stops it.
func (c *Cluster) startMaintenance() {
	m := &c.cfg.Maintain
	if m.Interval <= 0 {
		m.Interval = DefaultMaintainInterval
	}
	if m.MinBytes <= 0 {
		m.MinBytes = DefaultCompactMinBytes
	}
	if m.Growth <= 1 {
		m.Growth = DefaultCompactGrowth
	}
	c.compacted = c.log.Size()
	if m.Off {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.maintainCancel, c.maintainDone = cancel, make(chan struct{})
	go c.maintain(ctx)
}

// logRegionsLocked appends the region layout to the log (DUR-9) and
// returns the offset to persist; 0 in memory. Called under c.mu, so the
// last record is the last layout.
func (c *Cluster) logRegionsLocked() int64 {
	if c.log == nil {
		return 0
	}
	return c.log.AppendRegions(c.topo.NextID(), c.topo.Regions())
}

// SaveMeta stores a named value of a component beside the store (the
// fake PD's service GC safe points, G27): durable before it returns on a
// durable cluster, kept in memory otherwise; a reopen gives back the last
// value of each name (Meta).
func (c *Cluster) SaveMeta(name string, value []byte) error {
	c.mu.Lock()
	c.meta[name] = append([]byte(nil), value...)
	c.mu.Unlock()
	if c.log == nil {
		return nil
	}
	if err := c.log.SaveMeta(name, value); err != nil {
		if errors.Is(err, kvlog.ErrClosed) {
			return ErrClosed
		}
		return fmt.Errorf("fakeupstream: save %s: %w", name, err)
	}
	return nil
}

// Meta returns the last value saved under name (nil: none).
func (c *Cluster) Meta(name string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.meta[name]...)
}

// Restored describes what New found in Config.Dir (zero in memory).
func (c *Cluster) Restored() RestoreStats { return c.restored }

// Durable reports whether the cluster persists to a Dir.
func (c *Cluster) Durable() bool { return c.log != nil }

// lsnLocked is the log offset covering every change applied so far (0 in
// memory). Called under c.mu.
func (c *Cluster) lsnLocked() int64 {
	if c.log == nil {
		return 0
	}
	return c.log.Appended()
}

// persist waits until the log is durable up to lsn (group commit). In
// memory it returns at once.
func (c *Cluster) persist(lsn int64) error {
	if c.log == nil || lsn == 0 {
		return nil
	}
	if err := c.log.Sync(lsn); err != nil {
		if errors.Is(err, kvlog.ErrClosed) {
			return ErrClosed
		}
		return fmt.Errorf("fakeupstream: persist: %w", err)
	}
	return nil
}

// Close makes every logged change durable and releases Config.Dir (its
// files and lock); a later New on the Dir restores the state. Changes
// after Close fail with ErrClosed. In memory Close does nothing. Close is
// idempotent.
func (c *Cluster) Close() error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closed || c.log == nil {
		c.closed = true
		return nil
	}
	c.closed = true
	if c.maintainCancel != nil {
		c.maintainCancel()
		<-c.maintainDone
	}
	if err := c.log.Close(); err != nil {
		return fmt.Errorf("fakeupstream: close %s: %w", c.cfg.Dir, err)
	}
	return nil
}

// durableLocker is the feed's mutex in a durable cluster: it is c.mu, but
// Lock returns only when every change applied so far is on disk, so
// Stream.Recv never hands a CDC client a row (or a resolved ts above a
// commit) that a crash could still take back (DUR-3). It retries twice
// without holding c.mu, then waits holding it, so a steady stream of
// commits cannot starve a reader.
type durableLocker struct{ c *Cluster }

func (d durableLocker) Lock() {
	c := d.c
	for i := 0; ; i++ {
		c.mu.Lock()
		if !c.log.Pending() {
			return
		}
		lsn := c.log.Appended()
		if i >= 2 {
			_ = c.log.Sync(lsn)
			return
		}
		c.mu.Unlock()
		_ = c.log.Sync(lsn)
	}
}

func (d durableLocker) Unlock() { d.c.mu.Unlock() }
