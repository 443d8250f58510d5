package normalize

import (
	"bytes"
	"context"
	"fmt"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize/ddlmap"
)

// RowInput is one row change as the bridge consumes it: the fields of
// minicdc.RowChanged with the row images as ColumnSources. Everything in it
// is borrowed for the call.
type RowInput struct {
	TableID   int64
	CommitTs  uint64
	RowType   minicdc.RowType
	Pre, Post ColumnSource // nil when the image is absent
	RowKey    []byte
	TableInfo *minicdc.TableInfo
}

// shapeKey identifies a schema version without keeping the TableInfo.
type shapeKey struct {
	id       int64
	updateTS uint64
	maxCol   int64
	maxIdx   int64
	ncols    int
	version  uint16
}

// shapeCache keeps the lowered shapes a path has seen recently.
type shapeCache struct {
	lastKey shapeKey
	last    *shape
	m       map[shapeKey]*shape
}

const shapeCacheMax = 16

func (c *shapeCache) get(ti *minicdc.TableInfo, roles RoleOverrides) (*shape, error) {
	if ti == nil {
		return nil, fmt.Errorf("normalize: row without TableInfo")
	}
	k := shapeKey{id: ti.ID, updateTS: ti.UpdateTS, maxCol: ti.MaxColumnID, maxIdx: ti.MaxIndexID, ncols: len(ti.Columns), version: ti.Version}
	if c.last != nil && k == c.lastKey {
		return c.last, nil
	}
	s, ok := c.m[k]
	if !ok {
		var err error
		if s, err = ddlmap.BuildShape(ti, roles); err != nil {
			return nil, err
		}
		if c.m == nil || len(c.m) >= shapeCacheMax {
			c.m = map[shapeKey]*shape{}
		}
		c.m[k] = s
	}
	c.lastKey, c.last = k, s
	return s, nil
}

// AddRow is the row path (N15): it copies the change into owned mutations
// and buffers them in the partition's reorder buffer, waiting at most the
// backpressure window for room (N13). Safe for concurrent use across
// tables; calls for one table must be sequential (M13).
func (b *Bridge) AddRow(ctx context.Context, in RowInput) error {
	if !b.ready.Load() {
		return fmt.Errorf("normalize: row for table %d before Open", in.TableID)
	}
	if err := b.checkStopped(); err != nil {
		return err
	}
	p, ok := b.partByID(in.TableID)
	if !ok {
		return fmt.Errorf("normalize: row for table %d, which is not configured", in.TableID)
	}
	if in.CommitTs <= p.skip {
		return nil // acknowledged before the restart (N20)
	}
	s, err := p.shapes.get(in.TableInfo, p.coll.roles)
	if err != nil {
		return err
	}
	c := &p.copier
	switch in.RowType {
	case minicdc.RowTypeInsert, minicdc.RowTypeUpdate:
		if in.Post == nil {
			return &RowError{TableID: in.TableID, CommitTs: in.CommitTs, Err: fmt.Errorf("%s without a row image", in.RowType)}
		}
		hadOld := false
		if in.RowType == minicdc.RowTypeUpdate && in.Pre != nil {
			// A key change is a delete of the old key plus an upsert (N15).
			if err := c.copyImage(s, in.TableInfo, in.Pre, in.RowKey, in.TableID, in.CommitTs, true); err != nil {
				return err
			}
			if err := c.buildKey(s); err != nil {
				return &RowError{TableID: in.TableID, CommitTs: in.CommitTs, Err: fmt.Errorf("old image: %w", err)}
			}
			c.oldKey = append(c.oldKey[:0], c.keyBuf...)
			hadOld = true
		}
		if err := c.copyImage(s, in.TableInfo, in.Post, in.RowKey, in.TableID, in.CommitTs, false); err != nil {
			return err
		}
		if err := c.buildKey(s); err != nil {
			return &RowError{TableID: in.TableID, CommitTs: in.CommitTs, Err: err}
		}
		up := c.own(s, in.CommitTs, apiv1.MutationKind_MUTATION_KIND_UPSERT, true)
		if hadOld && !bytes.Equal(c.oldKey, up.pk()) {
			c.keyBuf = append(c.keyBuf[:0], c.oldKey...)
			del := c.own(s, in.CommitTs, apiv1.MutationKind_MUTATION_KIND_DELETE, false)
			if err := b.buffer(ctx, p, del); err != nil {
				up.release()
				return err
			}
		}
		return b.buffer(ctx, p, up)
	case minicdc.RowTypeDelete:
		if in.Pre != nil {
			if err := c.copyImage(s, in.TableInfo, in.Pre, in.RowKey, in.TableID, in.CommitTs, true); err != nil {
				return err
			}
		} else if err := c.keyFromRowKey(s, in.TableInfo, in.RowKey); err != nil {
			return &RowError{TableID: in.TableID, CommitTs: in.CommitTs, Err: fmt.Errorf("delete without old image: %w", err)}
		}
		if err := c.buildKey(s); err != nil {
			return &RowError{TableID: in.TableID, CommitTs: in.CommitTs, Err: err}
		}
		m := c.own(s, in.CommitTs, apiv1.MutationKind_MUTATION_KIND_DELETE, false)
		return b.buffer(ctx, p, m)
	}
	return &RowError{TableID: in.TableID, CommitTs: in.CommitTs, Err: fmt.Errorf("unknown row type %s", in.RowType)}
}

func (b *Bridge) buffer(ctx context.Context, p *partition, m Mutation) error {
	if err := p.buf.Add(ctx, m.CommitTs, m.size(), m); err != nil {
		m.release()
		return overflowError(err)
	}
	p.rows.Add(1)
	return nil
}

// keyFromRowKey fills the key of an int-handle table from the record key
// when a delete carries no old image.
func (c *rowCopier) keyFromRowKey(s *shape, ti *minicdc.TableInfo, key []byte) error {
	if !s.RowID && !ti.PKIsHandle {
		return fmt.Errorf("table %d has a clustered (common handle) key; the old image is required", ti.ID)
	}
	h, err := rowIDFromKey(key)
	if err != nil {
		return err
	}
	c.scratch = c.scratch[:0]
	c.useTmpVals(len(s.Fields))
	c.cur[s.PK[0]] = ownedVal{kind: vInt, num: uint64(h)}
	if f := s.Fields[s.PK[0]]; f.Type == apiv1.FieldType_FIELD_TYPE_UINT {
		c.cur[s.PK[0]].kind = vUint
	}
	return nil
}
