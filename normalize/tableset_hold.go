package normalize

// A table added to a running bridge with rows already in it (LT6): its
// partitions are held while their snapshot at the join ts S is ingested
// into the bridge's epoch (seqs from 1), and the stream's rows above S,
// buffered meanwhile, follow it with the next seqs. So no row is applied
// twice or missed, and one epoch's seqs stay one contiguous run.

import (
	"context"
	"fmt"
)

// HeldPartition is where a held partition's snapshot writes: the bridge's
// epoch, seqs from 1.
type HeldPartition struct {
	PhysicalID int64
	Epoch      uint64
}

// HoldPartitions holds the partitions of ids, which AddTables just added
// and no checkpoint has reached yet: until ReleasePartitions, checkpoints
// record their value but neither ingest their rows nor store progress,
// and a DDL of their collection is refused (the host waits for the
// snapshot before it delivers one, LT6).
func (b *Bridge) HoldPartitions(ids []int64) ([]HeldPartition, error) {
	b.ctl.Lock()
	defer b.ctl.Unlock()
	var out []HeldPartition
	for _, id := range ids {
		p, ok := b.partByID(id)
		if !ok || p.retired {
			return nil, fmt.Errorf("normalize: holding table %d: not mirrored", id)
		}
		if p.seq.next != 1 || p.advanced != 0 || p.lastCP != 0 {
			return nil, fmt.Errorf("normalize: holding %s: it already streamed (seq %d, progress %d)", p.name, p.seq.next, p.advanced)
		}
		p.held = true
		out = append(out, HeldPartition{PhysicalID: id, Epoch: p.seq.epoch})
	}
	return out, nil
}

// SnapshotEnd is what a held partition's snapshot left in the emulator:
// the next free seq of the epoch and the progress it stored (0: none).
type SnapshotEnd struct {
	PhysicalID int64
	NextSeq    uint64
	Stored     uint64
}

// ReleasePartitions ends the hold of each partition (LT6): its seqs go on
// after the snapshot's, and the stream's rows buffered up to the last
// checkpoint are ingested and that checkpoint stored now.
func (b *Bridge) ReleasePartitions(ctx context.Context, ends []SnapshotEnd) error {
	b.ctl.Lock()
	defer b.ctl.Unlock()
	if err := b.checkStopped(); err != nil {
		return err
	}
	for _, e := range ends {
		p, ok := b.partByID(e.PhysicalID)
		if !ok || !p.held {
			return fmt.Errorf("normalize: releasing table %d: not held", e.PhysicalID)
		}
		if e.NextSeq < p.seq.next {
			return fmt.Errorf("normalize: releasing %s: the snapshot's next seq %d is below the partition's %d", p.name, e.NextSeq, p.seq.next)
		}
		if e.NextSeq > p.seq.next {
			p.seq.next = e.NextSeq
			p.seqRun = seqRun{epoch: p.seq.epoch, next: e.NextSeq} // the snapshot's seqs came first
		}
		if e.Stored > p.advanced {
			p.advanced, p.stateInSink = e.Stored, true
		}
		p.held = false
		if p.retired || p.lastCP == 0 {
			continue
		}
		if err := b.drainAndIngest(ctx, p, p.lastCP, false); err != nil {
			return err
		}
		if err := b.advance(ctx, p, p.lastCP); err != nil {
			return err
		}
	}
	return nil
}

// heldIn reports the first held partition of coll ("" when none).
func heldIn(coll *collection) string {
	for _, p := range coll.partitions {
		if p.held {
			return p.name
		}
	}
	return ""
}

// CollectionOf names the collection that maps physical table id ("" when
// none does).
func (b *Bridge) CollectionOf(id int64) string {
	b.ctl.Lock()
	defer b.ctl.Unlock()
	if p, ok := b.partByID(id); ok {
		return p.coll.name
	}
	return ""
}
