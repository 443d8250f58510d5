package normalize

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
)

// ColumnSource reads the columns of one borrowed row image. Values it
// returns may borrow the row's bytes; the bridge copies them before the
// callback returns (N15).
type ColumnSource interface {
	// Column returns the value of the column at offset in
	// TableInfo.Columns (col is that column).
	Column(offset int, col *minicdc.ColumnInfo) (minicdc.Value, error)
}

// BulkColumnSource is a ColumnSource that can decode a whole image in one
// pass (minicdc.Row.Values); the bridge uses it for full images.
type BulkColumnSource interface {
	ColumnSource
	// Values fills dst (grown to len(TableInfo.Columns)) by column offset.
	Values(dst []minicdc.Value) ([]minicdc.Value, error)
}

// valKind is the owned form of a contract Value kind (E42).
type valKind uint8

const (
	vNull valKind = iota
	vInt
	vUint
	vFloat
	vString
	vBytes
	vJSON
	vVector // little-endian float32s in data
)

// ownedVal is one field value: fixed payloads in num, variable payloads as
// a range of the owning mutation's data.
type ownedVal struct {
	num  uint64
	off  uint32
	n    uint32
	kind valKind
}

// Mutation is an owned row change: everything it references was copied out
// of the callback's borrowed views into slab memory of its partition.
//
// Field order keeps the struct at 80 bytes: it is copied in and out of
// the reorder buffer once per row.
type Mutation struct {
	CommitTs uint64
	shape    *shape
	chunk    *chunk     // slab chunk holding vals and data; nil when allocated
	vals     []ownedVal // one per shape field for upserts; nil for deletes
	// data holds the variable-size value bytes followed by the canonical
	// primary key (E14) from pkOff on, in slab memory.
	data  []byte
	pkOff uint32
	Kind  apiv1.MutationKind
}

// release returns the mutation's slab memory; the mutation must not be
// used afterwards.
func (m *Mutation) release() {
	if m.chunk != nil {
		m.chunk.release()
		m.chunk = nil
	}
}

// PrimaryKey returns the canonical key string (a copy).
func (m *Mutation) PrimaryKey() string { return string(m.pk()) }

func (m *Mutation) pk() []byte { return m.data[m.pkOff:] }

// size is what the mutation costs against MaxUnsealedBytes (N9) and,
// with the buffer's per-row bytes (reorder.ItemOverhead, which holds the
// Mutation struct itself), against the memory quota (RS1): the bytes it
// points to, measured by TestRS1_HeldBytesMatchTheHeap.
func (m *Mutation) size() int64 {
	vals := int64(len(m.vals)) * int64(unsafe.Sizeof(ownedVal{}))
	if m.chunk == nil {
		return int64(len(m.data)) + vals // its own allocations
	}
	// In slab memory a chunk is retired when either its values or its
	// bytes run out, so a row holds the larger of its two shares of the
	// whole chunk (values and bytes): rows of few, short fields leave the
	// bytes half empty, and that memory is held too.
	const valsCap = slabVals * int64(unsafe.Sizeof(ownedVal{}))
	const total = valsCap + slabBytes
	return max(int64(len(m.data))*total/slabBytes, vals*total/valsCap)
}

// chunk is one block of slab memory. refs counts the buffered mutations
// that point into it, plus one while it is its copier's current chunk.
// Mutations are copied into protobuf messages before they are released
// (toProto copies every byte), so a chunk whose count drops to zero is
// recycled: in steady state copying a row allocates nothing and the GC has
// nothing to collect.
type chunk struct {
	vals []ownedVal
	data []byte
	refs atomic.Int32
}

func (c *chunk) release() {
	if c.refs.Add(-1) == 0 {
		c.vals, c.data = c.vals[:0], c.data[:0]
		chunks.put(c)
	}
}

// chunkFreeList recycles chunks between copiers (path goroutines) and the
// control goroutine that releases drained rows.
type chunkFreeList struct {
	mu   sync.Mutex
	free []*chunk
}

// maxFreeChunks bounds the free list (N45): the chunks it keeps are
// charged to no quota (the list is shared by every bridge of the
// process), so it keeps only enough to absorb the churn of a seal's drain,
// 32 chunks of chunkBytes (1.75 MiB), and leaves the rest to the GC.
const maxFreeChunks = 32

// chunkBytes is the heap of one chunk's value slots and bytes.
const chunkBytes = slabVals*int(unsafe.Sizeof(ownedVal{})) + slabBytes

var chunks chunkFreeList

func (l *chunkFreeList) get() *chunk {
	l.mu.Lock()
	if n := len(l.free); n > 0 {
		c := l.free[n-1]
		l.free[n-1] = nil
		l.free = l.free[:n-1]
		l.mu.Unlock()
		return c
	}
	l.mu.Unlock()
	return &chunk{vals: make([]ownedVal, 0, slabVals), data: make([]byte, 0, slabBytes)}
}

func (l *chunkFreeList) put(c *chunk) {
	l.mu.Lock()
	if len(l.free) < maxFreeChunks {
		l.free = append(l.free, c)
	}
	l.mu.Unlock()
}

// slab hands out owned memory from the copier's current chunk.
type slab struct {
	cur *chunk
}

const (
	slabVals  = 1024
	slabBytes = 32 << 10
)

// fresh retires the current chunk and takes another.
func (s *slab) fresh() {
	if s.cur != nil {
		s.cur.release()
	}
	s.cur = chunks.get()
	s.cur.refs.Store(1)
}

// takeVals returns n value slots. Rows too wide for a chunk get their own
// allocation (and no chunk).
func (s *slab) takeVals(n int) []ownedVal {
	if n > slabVals/4 {
		return make([]ownedVal, n)
	}
	if s.cur == nil || cap(s.cur.vals)-len(s.cur.vals) < n {
		s.fresh()
	}
	c := s.cur
	start := len(c.vals)
	c.vals = c.vals[:start+n]
	return c.vals[start : start+n : start+n]
}

// inChunk reports whether vals were taken from chunk c.
func inChunk(c *chunk, vals []ownedVal) bool {
	if c == nil || len(vals) == 0 || cap(c.vals) == 0 {
		return false
	}
	base := unsafe.Pointer(unsafe.SliceData(c.vals[:cap(c.vals)]))
	p := unsafe.Pointer(unsafe.SliceData(vals))
	return uintptr(p) >= uintptr(base) && uintptr(p) < uintptr(base)+uintptr(cap(c.vals))*unsafe.Sizeof(ownedVal{})
}

// rowCopier lowers borrowed rows into owned mutations for one partition.
// It is used only by that partition's delivery goroutine (M13).
type rowCopier struct {
	slab    slab
	scratch []byte          // value bytes of the row being copied
	keyBuf  []byte          // primary key being built
	oldKey  []byte          // key of an update's old image
	comp    []byte          // one key component
	tmpVals []ownedVal      // scratch values of a key-only image
	cur     []ownedVal      // values of the image being copied (slab or tmpVals)
	datums  []minicdc.Value // a whole image from a BulkColumnSource
}

// RowError names the table, column and problem of a row that cannot be
// lowered.
type RowError struct {
	TableID  int64
	CommitTs uint64
	Column   string
	Err      error
}

func (e *RowError) Error() string {
	return fmt.Sprintf("normalize: table %d row at commit_ts=%d column %q: %v", e.TableID, e.CommitTs, e.Column, e.Err)
}

func (e *RowError) Unwrap() error { return e.Err }

// copyImage reads the shape's fields (only the key fields when keyOnly)
// into c.cur and c.scratch. A full image's values go straight into slab
// memory (they become the mutation's); a key-only image uses scratch.
func (c *rowCopier) copyImage(s *shape, ti *minicdc.TableInfo, src ColumnSource, rowKey []byte, tableID int64, commitTs uint64, keyOnly bool) error {
	c.scratch = c.scratch[:0]
	n := len(s.Fields)
	if keyOnly {
		c.useTmpVals(n)
		n = len(s.PK)
	} else {
		c.cur = c.slab.takeVals(n)
	}
	var all []minicdc.Value
	if bulk, ok := src.(BulkColumnSource); ok && !keyOnly {
		var err error
		if c.datums, err = bulk.Values(c.datums[:0]); err != nil {
			return &RowError{TableID: tableID, CommitTs: commitTs, Err: err}
		}
		all = c.datums
	}
	for j := 0; j < n; j++ {
		i := j
		if keyOnly {
			i = s.PK[j]
		}
		f := &s.Fields[i]
		if all != nil && f.Offset >= 0 && f.Offset < len(all) {
			v, err := c.lower(f, &all[f.Offset])
			if err != nil {
				return &RowError{TableID: tableID, CommitTs: commitTs, Column: f.Name, Err: err}
			}
			c.cur[i] = v
			continue
		}
		var v ownedVal
		if f.Offset < 0 {
			h, err := rowIDFromKey(rowKey)
			if err != nil {
				return &RowError{TableID: tableID, CommitTs: commitTs, Column: f.Name, Err: err}
			}
			v = ownedVal{kind: vInt, num: uint64(h)}
		} else {
			if f.Offset >= len(ti.Columns) {
				return &RowError{TableID: tableID, CommitTs: commitTs, Column: f.Name,
					Err: fmt.Errorf("column offset %d outside the row's schema (%d columns)", f.Offset, len(ti.Columns))}
			}
			d, err := src.Column(f.Offset, ti.Columns[f.Offset])
			if err != nil {
				return &RowError{TableID: tableID, CommitTs: commitTs, Column: f.Name, Err: err}
			}
			v, err = c.lower(f, &d)
			if err != nil {
				return &RowError{TableID: tableID, CommitTs: commitTs, Column: f.Name, Err: err}
			}
		}
		c.cur[i] = v
	}
	return nil
}

func (c *rowCopier) useTmpVals(n int) {
	if cap(c.tmpVals) < n {
		c.tmpVals = make([]ownedVal, n)
	}
	c.tmpVals = c.tmpVals[:n]
	clear(c.tmpVals)
	c.cur = c.tmpVals
}

// lower converts one datum to the owned value of field f (N17, E42),
// appending variable bytes to c.scratch.
func (c *rowCopier) lower(f *fieldSpec, d *minicdc.Value) (ownedVal, error) {
	k := d.Kind()
	if k == minicdc.ValueNull {
		return ownedVal{kind: vNull}, nil
	}
	bad := func() (ownedVal, error) {
		return ownedVal{}, fmt.Errorf("datum of kind %s does not fit field type %s", k, f.Type)
	}
	switch f.Type {
	case apiv1.FieldType_FIELD_TYPE_INT:
		switch k {
		case minicdc.ValueInt64, minicdc.ValueYear:
			return ownedVal{kind: vInt, num: uint64(d.GetInt64())}, nil
		case minicdc.ValueUint64:
			if d.GetUint64() > math.MaxInt64 {
				return ownedVal{}, fmt.Errorf("unsigned value %d overflows INT", d.GetUint64())
			}
			return ownedVal{kind: vInt, num: d.GetUint64()}, nil
		}
		return bad()
	case apiv1.FieldType_FIELD_TYPE_UINT, apiv1.FieldType_FIELD_TYPE_BIT:
		switch k {
		case minicdc.ValueUint64, minicdc.ValueBit:
			return ownedVal{kind: vUint, num: d.GetUint64()}, nil
		case minicdc.ValueInt64:
			if d.GetInt64() < 0 {
				return ownedVal{}, fmt.Errorf("negative value %d for unsigned field", d.GetInt64())
			}
			return ownedVal{kind: vUint, num: d.GetUint64()}, nil
		}
		return bad()
	case apiv1.FieldType_FIELD_TYPE_FLOAT:
		switch k {
		case minicdc.ValueFloat64:
			return ownedVal{kind: vFloat, num: math.Float64bits(d.GetFloat64())}, nil
		case minicdc.ValueFloat32:
			// The float32's shortest decimal, as TiDB shows it, not its
			// widened binary value (0.1, not 0.10000000149011612).
			var buf [32]byte
			b := strconv.AppendFloat(buf[:0], float64(d.GetFloat32()), 'g', -1, 32)
			x, err := strconv.ParseFloat(unsafe.String(&b[0], len(b)), 64)
			if err != nil {
				return ownedVal{}, err
			}
			return ownedVal{kind: vFloat, num: math.Float64bits(x)}, nil
		}
		return bad()
	case apiv1.FieldType_FIELD_TYPE_BYTES:
		if k != minicdc.ValueBytes && k != minicdc.ValueString {
			return bad()
		}
		return c.appendRaw(vBytes, d.GetBytes()), nil
	case apiv1.FieldType_FIELD_TYPE_STRING, apiv1.FieldType_FIELD_TYPE_ENUM, apiv1.FieldType_FIELD_TYPE_SET:
		if k == minicdc.ValueString || k == minicdc.ValueBytes {
			return c.appendRaw(vString, d.GetBytes()), nil
		}
		return c.appendText(vString, d)
	case apiv1.FieldType_FIELD_TYPE_DECIMAL:
		if k != minicdc.ValueDecimal {
			return bad()
		}
		return c.appendText(vString, d)
	case apiv1.FieldType_FIELD_TYPE_TIME:
		if k != minicdc.ValueTime {
			return bad()
		}
		return c.appendText(vString, d)
	case apiv1.FieldType_FIELD_TYPE_DURATION:
		if k != minicdc.ValueDuration {
			return bad()
		}
		return c.appendText(vString, d)
	case apiv1.FieldType_FIELD_TYPE_JSON:
		if k != minicdc.ValueJSON {
			return bad()
		}
		return c.appendText(vJSON, d)
	case apiv1.FieldType_FIELD_TYPE_VECTOR:
		if k != minicdc.ValueVectorFloat32 {
			return bad()
		}
		b := d.GetBytes()
		if len(b) < 4 {
			return ownedVal{}, fmt.Errorf("vector payload of %d bytes is shorter than its 4-byte count", len(b))
		}
		n := binary.LittleEndian.Uint32(b)
		if uint64(len(b)-4) != uint64(n)*4 {
			return ownedVal{}, fmt.Errorf("vector count %d does not match payload of %d bytes", n, len(b)-4)
		}
		return c.appendRaw(vVector, b[4:]), nil
	}
	return ownedVal{}, fmt.Errorf("unsupported field type %s", f.Type)
}

func (c *rowCopier) appendRaw(k valKind, b []byte) ownedVal {
	off := len(c.scratch)
	c.scratch = append(c.scratch, b...)
	return ownedVal{kind: k, off: uint32(off), n: uint32(len(b))}
}

func (c *rowCopier) appendText(k valKind, d *minicdc.Value) (ownedVal, error) {
	off := len(c.scratch)
	out, err := d.AppendText(c.scratch)
	if err != nil {
		c.scratch = c.scratch[:off]
		return ownedVal{}, err
	}
	c.scratch = out
	return ownedVal{kind: k, off: uint32(off), n: uint32(len(out) - off)}, nil
}

// buildKey renders the canonical primary key (E14, N19) of the row in
// c.cur/c.scratch into c.keyBuf.
func (c *rowCopier) buildKey(s *shape) error {
	c.keyBuf = c.keyBuf[:0]
	for i, fi := range s.PK {
		v := &c.cur[fi]
		c.comp = c.comp[:0]
		switch v.kind {
		case vInt:
			c.comp = strconv.AppendInt(c.comp, int64(v.num), 10)
		case vUint:
			c.comp = strconv.AppendUint(c.comp, v.num, 10)
		case vFloat:
			c.comp = strconv.AppendFloat(c.comp, math.Float64frombits(v.num), 'g', -1, 64)
		case vString:
			c.comp = append(c.comp, c.scratch[v.off:v.off+v.n]...)
		case vBytes:
			c.comp = hex.AppendEncode(c.comp, c.scratch[v.off:v.off+v.n])
		case vNull:
			return fmt.Errorf("primary-key field %q is null", s.Fields[fi].Name)
		default:
			return fmt.Errorf("primary-key field %q has a value that cannot be a key", s.Fields[fi].Name)
		}
		if len(s.PK) == 1 {
			c.keyBuf = append(c.keyBuf, c.comp...)
			break
		}
		if i > 0 {
			c.keyBuf = append(c.keyBuf, ',')
		}
		for _, ch := range c.comp {
			if ch == '\\' || ch == ',' {
				c.keyBuf = append(c.keyBuf, '\\')
			}
			c.keyBuf = append(c.keyBuf, ch)
		}
	}
	if len(c.keyBuf) == 0 {
		return fmt.Errorf("primary key is empty")
	}
	return nil
}

// own moves the row being copied into slab memory as a Mutation holding a
// reference on its chunk. Values (copyImage put them in the current chunk)
// and bytes (values then key) live in the same chunk; if the bytes do not
// fit, the row moves to a fresh chunk.
func (c *rowCopier) own(s *shape, commitTs uint64, kind apiv1.MutationKind, withVals bool) Mutation {
	m := Mutation{CommitTs: commitTs, Kind: kind, shape: s}
	if !withVals {
		c.scratch = c.scratch[:0]
	}
	m.pkOff = uint32(len(c.scratch))
	c.scratch = append(c.scratch, c.keyBuf...)
	n := len(c.scratch)
	sl := &c.slab
	valsInChunk := withVals && inChunk(sl.cur, c.cur)
	if n > slabBytes/4 || (withVals && !valsInChunk) {
		// Large row: plain allocations, no chunk.
		m.data = append([]byte(nil), c.scratch...)
		if withVals {
			m.vals = c.cur
			if valsInChunk {
				m.vals = append([]ownedVal(nil), c.cur...)
			}
		}
		return m
	}
	if sl.cur == nil || cap(sl.cur.data)-len(sl.cur.data) < n {
		sl.fresh()
		if withVals {
			// Move the values into the new chunk too.
			v := sl.takeVals(len(c.cur))
			copy(v, c.cur)
			c.cur = v
		}
	}
	ch := sl.cur
	start := len(ch.data)
	ch.data = append(ch.data, c.scratch...)
	m.data = ch.data[start : start+n : start+n]
	if withVals {
		m.vals = c.cur
	}
	ch.refs.Add(1)
	m.chunk = ch
	return m
}

// rowIDFromKey decodes the int handle of a record key
// `[keyspace prefix]t<table id>_r<handle>` (8-byte comparable ints).
func rowIDFromKey(key []byte) (int64, error) {
	const recLen = 19 // 't' + 8 + "_r" + 8
	n := len(key)
	if n != recLen && n != recLen+4 {
		return 0, fmt.Errorf("row key of %d bytes is not an int-handle record key (want %d or %d)", n, recLen, recLen+4)
	}
	p := key[n-recLen:]
	if p[0] != 't' || p[9] != '_' || p[10] != 'r' {
		return 0, fmt.Errorf("row key %x is not a record key (at offset %d)", key, n-recLen)
	}
	return int64(binary.BigEndian.Uint64(p[11:]) ^ (1 << 63)), nil
}
