package mounter

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// RowChange is one decoded row change (what minicdc.RowChanged carries).
type RowChange struct {
	RowType RowType
	// Row is the new image (empty for deletes); PreRow the old image
	// (empty for inserts; handle-only for deletes without old value). Both
	// are borrowed: valid until the Mounter's next Decode.
	Row    Row
	PreRow Row
	// RowKey is an owned copy of the raw record key, exactly as the entry
	// carried it (keyspace prefix included when present).
	RowKey []byte
	// HandleOnly marks a delete without old value: only the handle columns
	// of PreRow are known.
	HandleOnly bool
	// TableID is the physical table id from the key (a partition id for
	// partitioned tables).
	TableID int64
}

// Config tunes a Mounter.
type Config struct {
	// RequireOldValue says the KV source was asked for old values
	// (ExtraOp_ReadOldValue). See specs/mounter.md rule MT5 for what the
	// mounter can and cannot check with it.
	RequireOldValue bool
	// VerifyChecksum checks the checksum tail of row values that carry one
	// (TiDB 8.3+ with row checksums enabled) against the key, and fails the
	// entry on a mismatch (rule MT16).
	VerifyChecksum bool
}

// Errors callers may test for with errors.Is.
var (
	// ErrMissingOldValue: an update-classified entry has no old value
	// while old values were requested.
	ErrMissingOldValue = errors.New("mounter: update without old value")
	// ErrStaleRow: a Row was used after the Mounter decoded another entry.
	ErrStaleRow = errors.New("mounter: row view used after the next Decode (views are borrowed)")
	// ErrUnknownColumn: the column id is not in the row's TableInfo.
	ErrUnknownColumn = errors.New("mounter: unknown column")
	// ErrVirtualColumn: virtual generated columns are not stored.
	ErrVirtualColumn = errors.New("mounter: virtual generated column is not stored")
	// ErrNotPublic: the column is not public in this schema version.
	ErrNotPublic = errors.New("mounter: column is not public")
	// ErrHandleOnly: a handle-only image knows only its handle columns.
	ErrHandleOnly = errors.New("mounter: handle-only row image (delete without old value)")
)

// EntryError reports an entry the mounter cannot turn into a row change.
type EntryError struct {
	Key    []byte
	Reason string
	Err    error
}

func (e *EntryError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("mounter: key %x: %s: %v", e.Key, e.Reason, e.Err)
	}
	return fmt.Sprintf("mounter: key %x: %s", e.Key, e.Reason)
}

func (e *EntryError) Unwrap() error { return e.Err }

// Mounter decodes raw KV entries into row changes. It keeps per-table
// decoder state keyed by table id and TableInfo pointer and two reusable row
// images, so steady-state decoding does not allocate beyond the owned key
// copy (amortized through a slab). Not safe for concurrent use: one Mounter
// per goroutine.
type Mounter struct {
	cfg    Config
	tables map[int64]*tableDecoder
	last   *tableDecoder

	gen uint64 // bumped by every Decode; stale Rows compare against it

	// State of the entry being decoded, shared by both images.
	td           *tableDecoder
	handle       tablecodec.Handle
	handleDone   bool // handle datums decoded
	handleErr    error
	handleDatums []value.Datum
	handleScr    []byte // memcomparable strings of the common handle

	row, pre image
	slab     []byte
}

// New returns a Mounter.
func New(cfg Config) *Mounter {
	m := &Mounter{cfg: cfg, tables: make(map[int64]*tableDecoder)}
	m.row.m, m.pre.m = m, m
	return m
}

const slabSize = 16 << 10

// ownedKey copies key into the slab; the copy is capped so appends by the
// receiver never write into a neighbour.
func (m *Mounter) ownedKey(key []byte) []byte {
	if len(key) > slabSize/8 {
		return append([]byte(nil), key...)
	}
	if cap(m.slab)-len(m.slab) < len(key) {
		m.slab = make([]byte, 0, slabSize)
	}
	start := len(m.slab)
	m.slab = append(m.slab, key...)
	return m.slab[start:len(m.slab):len(m.slab)]
}

// decoderFor returns the cached decoder for ti, building it on first use
// or when the table's TableInfo pointer changed.
func (m *Mounter) decoderFor(ti *model.TableInfo) *tableDecoder {
	if m.last != nil && m.last.ti == ti {
		return m.last
	}
	td := m.tables[ti.ID]
	if td == nil || td.ti != ti {
		td = newTableDecoder(ti)
		m.tables[ti.ID] = td
	}
	m.last = td
	return td
}

// Forget drops the cached decoder state of a table (e.g. after it was
// dropped), so its TableInfo can be garbage collected.
func (m *Mounter) Forget(tableID int64) {
	if m.last != nil && m.last.ti.ID == tableID {
		m.last = nil
	}
	delete(m.tables, tableID)
}

// Decode classifies and decodes one entry with the TableInfo valid at
// commit_ts-1 (rules MT1-MT9). out's views borrow entry's bytes and the
// Mounter's internal state until the next Decode call; out.RowKey is owned.
func (m *Mounter) Decode(entry *kvevent.RawKVEntry, ti *model.TableInfo, out *RowChange) error {
	if entry == nil {
		m.gen++
		*out = RowChange{}
		return &EntryError{Reason: "nil entry"}
	}
	if err := m.decode(entry, ti, out); err != nil {
		*out = RowChange{}
		return err
	}
	return nil
}

func (m *Mounter) decode(entry *kvevent.RawKVEntry, ti *model.TableInfo, out *RowChange) error {
	m.gen++
	*out = RowChange{}
	m.td, m.handleDone, m.handleErr = nil, false, nil
	if ti == nil {
		return &EntryError{Key: entry.Key, Reason: "no TableInfo given"}
	}
	td := m.decoderFor(ti)
	if td.setupErr != nil {
		return &EntryError{Key: entry.Key, Reason: "unusable TableInfo", Err: td.setupErr}
	}
	_, rawKey, _ := tablecodec.RemoveKeyspacePrefix(entry.Key)
	tableID, h, err := tablecodec.DecodeRecordKey(rawKey)
	if err != nil {
		return &EntryError{Key: entry.Key, Reason: "not a record key", Err: err}
	}
	if !td.ownsPhysicalID(tableID) {
		return &EntryError{Key: entry.Key, Reason: fmt.Sprintf("key of table %d decoded with TableInfo of table %d %q (physical ids %v)",
			tableID, ti.ID, ti.Name.O, td.physIDs)}
	}
	if h.IsInt() == (td.handle.Kind == model.HandleCommon) {
		return &EntryError{Key: entry.Key, Reason: fmt.Sprintf("key has a %s handle but table %d %q is keyed by a %s handle",
			handleKindOf(h), ti.ID, ti.Name.O, td.handle.Kind)}
	}
	m.td, m.handle = td, h

	switch entry.OpType {
	case kvevent.OpTypePut:
		if len(entry.Value) == 0 {
			return &EntryError{Key: entry.Key, Reason: "put without a value"}
		}
		if err := m.row.reset(entry.Value, false); err != nil {
			return &EntryError{Key: entry.Key, Reason: "new value", Err: err}
		}
		if err := m.verify(&m.row, rawKey); err != nil {
			return &EntryError{Key: entry.Key, Reason: "new value", Err: err}
		}
		out.Row = Row{img: &m.row, gen: m.gen}
		if len(entry.OldValue) > 0 {
			if err := m.pre.reset(entry.OldValue, false); err != nil {
				return &EntryError{Key: entry.Key, Reason: "old value", Err: err}
			}
			if err := m.verify(&m.pre, rawKey); err != nil {
				return &EntryError{Key: entry.Key, Reason: "old value", Err: err}
			}
			out.RowType = RowTypeUpdate
			out.PreRow = Row{img: &m.pre, gen: m.gen}
		} else {
			out.RowType = RowTypeInsert
		}
	case kvevent.OpTypeDelete:
		out.RowType = RowTypeDelete
		if len(entry.OldValue) > 0 {
			if err := m.pre.reset(entry.OldValue, false); err != nil {
				return &EntryError{Key: entry.Key, Reason: "old value", Err: err}
			}
			if err := m.verify(&m.pre, rawKey); err != nil {
				return &EntryError{Key: entry.Key, Reason: "old value", Err: err}
			}
		} else {
			m.pre.reset(nil, true)
			out.HandleOnly = true
		}
		out.PreRow = Row{img: &m.pre, gen: m.gen}
	default:
		return &EntryError{Key: entry.Key, Reason: fmt.Sprintf("unknown op type %s", entry.OpType)}
	}
	out.TableID = tableID
	out.RowKey = m.ownedKey(entry.Key)
	return nil
}

// verify checks an image's checksum tail when asked to: version 2 covers
// the encoded handle, version 1 the record key (without keyspace prefix);
// version 0 tails (computed over column values) are not checked.
func (m *Mounter) verify(img *image, rawKey []byte) error {
	if !m.cfg.VerifyChecksum {
		return nil
	}
	ct, ok := img.view.Checksum()
	if !ok {
		return nil
	}
	switch ct.Version {
	case 1:
		return img.view.VerifyChecksum(rawKey)
	case 2:
		if m.handle.IsInt() {
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], uint64(m.handle.IntValue())^(1<<63))
			return img.view.VerifyChecksum(b[:])
		}
		return img.view.VerifyChecksum(m.handle.Encoded())
	}
	return nil
}

func handleKindOf(h tablecodec.Handle) string {
	if h.IsInt() {
		return "int"
	}
	return "common"
}

// handleDatum returns the value of the handle column at position pos,
// decoded from the key (rule MT7).
func (m *Mounter) handleDatum(c *column) (value.Datum, error) {
	if m.handle.IsInt() {
		v := m.handle.IntValue()
		if c.spec.Unsigned() {
			return value.NewUintDatum(uint64(v)), nil
		}
		return value.NewIntDatum(v), nil
	}
	if !m.handleDone {
		m.decodeCommonHandle()
	}
	if m.handleErr != nil {
		return value.Datum{}, m.handleErr
	}
	if c.keyLossy {
		return value.Datum{}, fmt.Errorf("mounter: clustered primary key column %d %q is not in the row value and its key form (prefix or collation %q) cannot be turned back into the value",
			c.info.ID, c.info.Name.O, c.info.FieldType.GetCollate())
	}
	if c.handlePos >= len(m.handleDatums) {
		return value.Datum{}, fmt.Errorf("mounter: common handle holds %d columns, primary key column %d %q is number %d",
			len(m.handleDatums), c.info.ID, c.info.Name.O, c.handlePos+1)
	}
	return m.handleDatums[c.handlePos], nil
}

// decodeCommonHandle decodes every datum of the common handle once per
// entry, each for its primary-key column.
func (m *Mounter) decodeCommonHandle() {
	m.handleDone = true
	m.handleDatums = m.handleDatums[:0]
	enc := m.handle.Encoded()
	if cap(m.handleScr) < len(enc) {
		m.handleScr = make([]byte, 0, 2*len(enc))
	}
	m.handleScr = m.handleScr[:0]
	off := 0
	for pos, offCol := range m.td.handleOffs {
		if off >= len(enc) || enc[off] == codec.NilFlag {
			m.handleErr = fmt.Errorf("mounter: common handle %x ends before primary key column %d (number %d)", enc, m.td.cols[offCol].info.ID, pos+1)
			return
		}
		c := &m.td.cols[offCol]
		n, err := codec.PeekLength(enc[off:])
		if err != nil {
			m.handleErr = fmt.Errorf("mounter: common handle %x, column %d at offset %d: %w", enc, c.info.ID, off, err)
			return
		}
		var d value.Datum
		if enc[off] == codec.BytesFlag {
			free := m.handleScr[len(m.handleScr):]
			_, data, err := codec.DecodeBytes(enc[off+1:off+n], free)
			if err != nil {
				m.handleErr = fmt.Errorf("mounter: common handle %x, column %d at offset %d: %w", enc, c.info.ID, off, err)
				return
			}
			m.handleScr = m.handleScr[:len(m.handleScr)+len(data)]
			d, err = stringForColumn(c, data)
			if err != nil {
				m.handleErr = err
				return
			}
		} else {
			d, err = rowcodec.DecodeCell(rowcodec.FormatKeyDatum, enc[off:off+n], &c.spec, off)
			if err != nil {
				m.handleErr = fmt.Errorf("mounter: common handle %x: %w", enc, err)
				return
			}
		}
		m.handleDatums = append(m.handleDatums, d)
		off += n
	}
}

func stringForColumn(c *column, data []byte) (value.Datum, error) {
	switch {
	case c.spec.IsString():
		return value.NewStringDatumBytes(data), nil
	case c.spec.IsBytes():
		return value.NewBytesDatum(data), nil
	}
	return value.Datum{}, fmt.Errorf("mounter: common handle holds bytes for primary key column %d %q of type %d",
		c.info.ID, c.info.Name.O, c.info.FieldType.GetType())
}
