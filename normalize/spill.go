package normalize

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/memquota"
	"github.com/searchfabric/sfemu/reorder"
	"github.com/searchfabric/sfemu/spill"
)

// SpillConfig lets transactions of any size through within a memory quota
// (specs/minicdc.md RS1-RS7). With Memory set, the per-partition bounds
// MaxUnsealedRows/MaxUnsealedBytes default to none: the shared quota is
// the bound, and with Dir set a full quota spills instead of stopping.
type SpillConfig struct {
	// Memory is the adapter's memory quota, shared by every partition.
	Memory *memquota.Quota
	// Disk is the spill quota (nil: unlimited).
	Disk *memquota.Quota
	// Dir is where runs go (<data-dir>/spill); nil: no spill.
	Dir *spill.Dir
	// Hint names what to raise in an overflow error (the host's flags).
	Hint string
}

// bufferOptions are the reorder options of partition pname: runs of its
// own codec in the spill directory, and slab memory returned when a row
// moves to disk.
func (b *Bridge) bufferOptions() []reorder.Option[Mutation] {
	opts := []reorder.Option[Mutation]{reorder.WithRelease(func(m *Mutation) { m.release() })}
	if b.cfg.Spill.Dir != nil {
		opts = append(opts, reorder.WithRuns[Mutation](spill.NewStore[Mutation](b.cfg.Spill.Dir, &mutationCodec{index: map[*shape]uint64{}})))
	}
	return opts
}

// Drained pieces: a sealed backlog (a spilled transaction of millions of
// rows) is read out of the buffer in pieces of a few batches, each
// ingested before the next is read, so it is never all in memory (N40).
func (b *Bridge) drainRows() int    { return 4 * b.cfg.MaxBatchRows }
func (b *Bridge) drainBytes() int64 { return 4 * b.cfg.MaxBatchBytes }

// drainAndIngest seals p at ts (ddl or checkpoint), then drains,
// sequences and ingests the sealed rows in bounded pieces (N6, N21, N40),
// and removes the spill runs they came from once all were acknowledged
// (RS4). Caller holds b.ctl; progress is advanced by the caller after it
// returns (N22), so safe_ts passes a transaction only after its last batch.
func (b *Bridge) drainAndIngest(ctx context.Context, p *partition, ts uint64, ddl bool) error {
	if err := p.buf.Seal(ts, ddl); err != nil {
		return fmt.Errorf("normalize: %s: %w", p.name, err)
	}
	for {
		var err error
		p.drained, err = p.buf.TakeUpTo(p.drained[:0], b.drainRows(), b.drainBytes())
		if err != nil {
			// A damaged or unreadable run: rows of this seal may already
			// be ingested with their seqs; only a restart recovers (N7).
			return b.stop(fmt.Errorf("normalize: %s: %w", p.name, err))
		}
		if len(p.drained) == 0 {
			break
		}
		if err := b.ingestDrained(ctx, p); err != nil {
			return err
		}
	}
	if err := p.buf.Acknowledge(); err != nil {
		return b.stop(fmt.Errorf("normalize: %s: %w", p.name, err))
	}
	return nil
}

// Release drops what the reorder buffers hold, in memory and on disk, and
// returns it to the quotas (RS4): the bridge's run is over (its adapter
// closed); the next run redelivers every unacknowledged row.
func (b *Bridge) Release() error {
	var errs []error
	for _, p := range b.parts {
		errs = append(errs, p.buf.Discard())
	}
	return errors.Join(errs...)
}

// mutationCodec writes a Mutation to a spill run and reads it back. The
// shape (the lowered schema) stays in memory: a run holds its index in
// the partition's shape list. One codec per partition, used under its
// buffer's lock.
type mutationCodec struct {
	shapes []*shape
	index  map[*shape]uint64
}

var _ spill.Codec[Mutation] = (*mutationCodec)(nil)

func (c *mutationCodec) Append(dst []byte, m Mutation) ([]byte, error) {
	idx, ok := c.index[m.shape]
	if !ok {
		c.shapes = append(c.shapes, m.shape)
		idx = uint64(len(c.shapes))
		c.index[m.shape] = idx
	}
	dst = binary.AppendUvarint(dst, idx)
	dst = binary.AppendUvarint(dst, uint64(m.Kind))
	dst = binary.AppendUvarint(dst, m.CommitTs)
	dst = binary.AppendUvarint(dst, uint64(m.pkOff))
	if m.vals == nil {
		dst = append(dst, 0)
	} else {
		dst = append(dst, 1)
		dst = binary.AppendUvarint(dst, uint64(len(m.vals)))
		for _, v := range m.vals {
			dst = append(dst, byte(v.kind))
			dst = binary.AppendUvarint(dst, v.num)
			dst = binary.AppendUvarint(dst, uint64(v.off))
			dst = binary.AppendUvarint(dst, uint64(v.n))
		}
	}
	return append(dst, m.data...), nil
}

func (c *mutationCodec) Decode(src []byte) (Mutation, error) {
	var m Mutation
	p := src
	next := func(what string) (uint64, error) {
		v, k := binary.Uvarint(p)
		if k <= 0 {
			return 0, fmt.Errorf("bad %s", what)
		}
		p = p[k:]
		return v, nil
	}
	idx, err := next("shape index")
	if err != nil {
		return m, err
	}
	if idx == 0 || idx > uint64(len(c.shapes)) {
		return m, fmt.Errorf("shape index %d of %d", idx, len(c.shapes))
	}
	m.shape = c.shapes[idx-1]
	kind, err := next("kind")
	if err != nil {
		return m, err
	}
	m.Kind = apiv1.MutationKind(kind)
	if m.CommitTs, err = next("commit ts"); err != nil {
		return m, err
	}
	pkOff, err := next("key offset")
	if err != nil {
		return m, err
	}
	if len(p) == 0 {
		return m, errors.New("missing values flag")
	}
	hasVals := p[0] == 1
	p = p[1:]
	if hasVals {
		n, err := next("value count")
		if err != nil {
			return m, err
		}
		if n > uint64(len(p)) {
			return m, fmt.Errorf("value count %d past the record", n)
		}
		m.vals = make([]ownedVal, n)
		for i := range m.vals {
			if len(p) == 0 {
				return m, fmt.Errorf("value %d cut", i)
			}
			v := &m.vals[i]
			v.kind = valKind(p[0])
			p = p[1:]
			if v.num, err = next("value"); err != nil {
				return m, err
			}
			off, err := next("value offset")
			if err != nil {
				return m, err
			}
			n, err := next("value length")
			if err != nil {
				return m, err
			}
			v.off, v.n = uint32(off), uint32(n)
		}
	}
	m.data = append([]byte(nil), p...)
	if pkOff > uint64(len(m.data)) {
		return m, fmt.Errorf("key offset %d past %d data bytes", pkOff, len(m.data))
	}
	m.pkOff = uint32(pkOff)
	for i, v := range m.vals {
		if uint64(v.off)+uint64(v.n) > uint64(len(m.data)) {
			return m, fmt.Errorf("value %d (%d+%d) past %d data bytes", i, v.off, v.n, len(m.data))
		}
	}
	return m, nil
}
