package normalize

import (
	"context"
	"fmt"

	"github.com/searchfabric/sfemu/minicdc"
)

var _ minicdc.Callback = (*Bridge)(nil)

func init() {
	// The runtime recognizes an overflow by its own sentinel (M14).
	runtimeOverflowSentinels = []error{minicdc.ErrReorderOverflow}
}

// runtimeRow adapts a borrowed minicdc.Row to ColumnSource. Each partition
// keeps two of them so passing one as an interface costs no allocation.
type runtimeRow struct{ r minicdc.Row }

func (m *runtimeRow) Column(offset int, _ *minicdc.ColumnInfo) (minicdc.Value, error) {
	return m.r.ColumnAt(offset)
}

// Values decodes the whole image in one pass (BulkColumnSource).
func (m *runtimeRow) Values(dst []minicdc.Value) ([]minicdc.Value, error) {
	return m.r.Values(dst)
}

// OnRowChanged implements minicdc.Callback (N15). It is called
// sequentially per table (M13), which is what makes the per-partition
// adapters safe.
func (b *Bridge) OnRowChanged(ctx context.Context, ev minicdc.RowChanged) error {
	p, ok := b.partByID(ev.TableID)
	if !ok {
		return fmt.Errorf("normalize: row for table %d, which is not configured", ev.TableID)
	}
	in := RowInput{TableID: ev.TableID, CommitTs: ev.CommitTs, RowType: ev.RowType, RowKey: ev.RowKey, TableInfo: ev.TableInfo}
	if !ev.Row.IsEmpty() {
		p.postRow.r = ev.Row
		in.Post = &p.postRow
	}
	if !ev.PreRow.IsEmpty() {
		p.preRow.r = ev.PreRow
		in.Pre = &p.preRow
	}
	err := b.AddRow(ctx, in)
	// Do not keep the borrowed views past the callback (M11).
	p.postRow.r, p.preRow.r = minicdc.Row{}, minicdc.Row{}
	return err
}

// OnDDL implements minicdc.Callback (N25-N29).
func (b *Bridge) OnDDL(ctx context.Context, ddl minicdc.DDL) error {
	return b.DDL(ctx, ddl)
}

// OnCheckpoint implements minicdc.Callback (N22).
func (b *Bridge) OnCheckpoint(ctx context.Context, cp minicdc.Checkpoint) error {
	return b.Checkpoint(ctx, cp.TableResolvedTs)
}
