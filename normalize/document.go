package normalize

import (
	"fmt"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize/ddlmap"
)

// valueRow is a ColumnSource over a full image held as values by column
// offset.
type valueRow []minicdc.Value

func (r valueRow) Column(offset int, col *minicdc.ColumnInfo) (minicdc.Value, error) {
	if offset < 0 || offset >= len(r) {
		return minicdc.Value{}, fmt.Errorf("column %q at offset %d outside the image (%d values)", col.Name.O, offset, len(r))
	}
	return r[offset], nil
}

// RowDocument lowers one full row image of table ti (values by column
// offset, rowKey its record key) to the canonical primary key and fields
// the bridge ingests for it (N15-N19), through the same conversion the
// row path uses. Consistency checks compare an upstream snapshot with the
// emulator's documents through it, so every field type compares exactly.
func RowDocument(ti *minicdc.TableInfo, rowKey []byte, values []minicdc.Value) (string, map[string]*apiv1.Value, error) {
	var b DocumentBuilder
	return b.Row(ti, rowKey, values)
}

// DocumentBuilder is RowDocument for many rows: the table's shape is
// built once per table and the rows' values are carved from shared slabs
// (a check of a table of millions of rows allocated ~50 KB of fresh slabs
// a row, one RowDocument each). The documents it returns stay valid; they
// keep their slabs alive while they are held.
type DocumentBuilder struct {
	ti    *minicdc.TableInfo
	shape *ddlmap.Shape
	alloc protoAlloc
}

// Row is RowDocument of one row.
func (b *DocumentBuilder) Row(ti *minicdc.TableInfo, rowKey []byte, values []minicdc.Value) (string, map[string]*apiv1.Value, error) {
	if b.ti != ti || b.shape == nil {
		s, err := ddlmap.BuildShape(ti, nil)
		if err != nil {
			return "", nil, err
		}
		b.ti, b.shape = ti, s
	}
	s := b.shape
	var c rowCopier
	defer func() {
		if c.slab.cur != nil {
			c.slab.cur.release()
		}
	}()
	if err := c.copyImage(s, ti, valueRow(values), rowKey, ti.ID, 0, false); err != nil {
		return "", nil, err
	}
	if err := c.buildKey(s); err != nil {
		return "", nil, err
	}
	m := c.own(s, 1, apiv1.MutationKind_MUTATION_KIND_UPSERT, true)
	defer m.release()
	data := append([]byte(nil), m.data...)
	pm := b.alloc.toProto(&m, 1, string(data), data)
	return pm.GetPrimaryKey(), pm.GetFields(), nil
}
