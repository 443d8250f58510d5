// Package kvlog is the durable form of a fake cluster's state: an
// append-only file of checksummed records, one per change of the MVCC store
// (lock written, write record added, lock removed, GC safe point raised)
// plus the TSO high-water mark. Replaying the records in order rebuilds the
// store. Appends are buffered and made durable by group commit: every
// waiter's records reach the disk with one write and one fsync shared by
// all concurrent committers. The rules are in specs/fakeupstream-cluster.md
// (§9, DUR-n).
package kvlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/searchfabric/sfemu/fakeupstream/mvcc"
	"github.com/searchfabric/sfemu/fakeupstream/topology"
)

// Magic opens every log file (8 bytes: format name and version).
const Magic = "SFKVLOG1"

// frameHeader is the per-record header: payload length and CRC-32C of the
// payload, both little-endian uint32.
const frameHeader = 8

// MaxRecord bounds one record's payload (a guard against a corrupt length).
const MaxRecord = 256 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Type is a record's kind (the payload's first byte).
type Type uint8

const (
	// TypeWrite: a write record was added to Key (Write; Unlock: the lock
	// of Write.StartTs on Key was removed by the same step).
	TypeWrite Type = iota + 1
	// TypeLock: Lock was written.
	TypeLock
	// TypeDelLock: the lock of StartTs on Key was removed.
	TypeDelLock
	// TypeGC: the GC safe point was raised to Ts.
	TypeGC
	// TypeTSO: the TSO high-water mark is Ts.
	TypeTSO
	// TypeRegions: the whole region layout (Regions) and the topology's
	// next id (Ts) after a split, merge or peer/leader change; the last
	// one replayed wins (DUR-9).
	TypeRegions
	// TypeMeta: a named value of a component beside the store (Key =
	// name, Write.Value = value), e.g. the fake PD's service GC safe
	// points; the last one of a name wins (G27).
	TypeMeta
)

func (t Type) String() string {
	switch t {
	case TypeWrite:
		return "write"
	case TypeLock:
		return "lock"
	case TypeDelLock:
		return "unlock"
	case TypeGC:
		return "gc"
	case TypeTSO:
		return "tso"
	case TypeRegions:
		return "regions"
	case TypeMeta:
		return "meta"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Record is one decoded log record. Byte slices alias the decode buffer.
type Record struct {
	Type    Type
	Key     []byte
	Write   mvcc.Write
	Unlock  bool
	Lock    mvcc.Lock
	StartTs uint64
	Ts      uint64
	// Regions of a TypeRegions record (keys alias the decode buffer).
	Regions []topology.Region
}

const (
	flagUnlock   = 1 << 0
	flagHasValue = 1 << 1
	flagAsync    = 1 << 2
)

// ---- encoding ----

func putBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// beginFrame reserves the frame header; endFrame fills it in.
func beginFrame(b []byte) ([]byte, int) {
	at := len(b)
	return append(b, 0, 0, 0, 0, 0, 0, 0, 0), at
}

func endFrame(b []byte, at int) []byte {
	p := b[at+frameHeader:]
	binary.LittleEndian.PutUint32(b[at:], uint32(len(p)))
	binary.LittleEndian.PutUint32(b[at+4:], crc32.Checksum(p, castagnoli))
	return b
}

// AppendWrite appends a framed TypeWrite record.
func AppendWrite(b, key []byte, w *mvcc.Write, unlock bool) []byte {
	b, at := beginFrame(b)
	b = append(b, byte(TypeWrite))
	b = putBytes(b, key)
	b = append(b, byte(w.Kind))
	b = binary.AppendUvarint(b, w.StartTs)
	b = binary.AppendUvarint(b, w.CommitTs)
	var fl byte
	if unlock {
		fl |= flagUnlock
	}
	if w.Value != nil {
		fl |= flagHasValue
	}
	b = append(b, fl)
	if w.Value != nil {
		b = putBytes(b, w.Value)
	}
	return endFrame(b, at)
}

// AppendLock appends a framed TypeLock record.
func AppendLock(b []byte, l *mvcc.Lock) []byte {
	b, at := beginFrame(b)
	b = append(b, byte(TypeLock))
	b = putBytes(b, l.Key)
	b = putBytes(b, l.Primary)
	b = binary.AppendUvarint(b, l.StartTs)
	b = binary.AppendUvarint(b, l.TTL)
	b = append(b, byte(l.Op))
	var fl byte
	if l.Value != nil {
		fl |= flagHasValue
	}
	if l.UseAsyncCommit {
		fl |= flagAsync
	}
	b = append(b, fl)
	if l.Value != nil {
		b = putBytes(b, l.Value)
	}
	b = binary.AppendUvarint(b, l.MinCommitTs)
	b = binary.AppendUvarint(b, uint64(len(l.Secondaries)))
	for _, s := range l.Secondaries {
		b = putBytes(b, s)
	}
	return endFrame(b, at)
}

// AppendDelLock appends a framed TypeDelLock record.
func AppendDelLock(b, key []byte, startTs uint64) []byte {
	b, at := beginFrame(b)
	b = append(b, byte(TypeDelLock))
	b = putBytes(b, key)
	b = binary.AppendUvarint(b, startTs)
	return endFrame(b, at)
}

// AppendTs appends a framed TypeGC or TypeTSO record.
func AppendTs(b []byte, t Type, ts uint64) []byte {
	b, at := beginFrame(b)
	b = append(b, byte(t))
	b = binary.AppendUvarint(b, ts)
	return endFrame(b, at)
}

// AppendRegions appends a framed TypeRegions record.
func AppendRegions(b []byte, nextID uint64, regions []topology.Region) []byte {
	b, at := beginFrame(b)
	b = append(b, byte(TypeRegions))
	b = binary.AppendUvarint(b, nextID)
	b = binary.AppendUvarint(b, uint64(len(regions)))
	for i := range regions {
		r := &regions[i]
		b = binary.AppendUvarint(b, r.ID)
		b = putBytes(b, r.StartKey)
		b = putBytes(b, r.EndKey)
		b = binary.AppendUvarint(b, r.ConfVer)
		b = binary.AppendUvarint(b, r.Version)
		b = binary.AppendUvarint(b, r.Leader)
		b = binary.AppendUvarint(b, uint64(len(r.Peers)))
		for _, p := range r.Peers {
			b = binary.AppendUvarint(b, p.ID)
			b = binary.AppendUvarint(b, p.StoreID)
		}
	}
	return endFrame(b, at)
}

// AppendMeta appends a framed TypeMeta record.
func AppendMeta(b []byte, name string, value []byte) []byte {
	b, at := beginFrame(b)
	b = append(b, byte(TypeMeta))
	b = putBytes(b, []byte(name))
	b = putBytes(b, value)
	return endFrame(b, at)
}

// ---- decoding ----

// DecodeError: a record's payload does not parse. Off is the payload
// offset where parsing stopped.
type DecodeError struct {
	Off  int
	What string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("payload offset %d: %s", e.Off, e.What)
}

type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = &DecodeError{Off: r.off, What: what}
	}
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail("bad varint for " + what)
		return 0
	}
	r.off += n
	return v
}

func (r *reader) byte1(what string) byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail("missing " + what)
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *reader) bytes(what string) []byte {
	n := r.uvarint(what + " length")
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.off) {
		r.fail(fmt.Sprintf("%s of %d bytes runs past the record end", what, n))
		return nil
	}
	v := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return v
}

// DecodePayload parses one record payload (without its frame). It never
// panics; an error says what is wrong and where.
func DecodePayload(p []byte) (Record, error) {
	r := &reader{b: p}
	var rec Record
	rec.Type = Type(r.byte1("record type"))
	switch rec.Type {
	case TypeWrite:
		rec.Key = r.bytes("key")
		rec.Write.Kind = mvcc.WriteKind(r.byte1("write kind"))
		rec.Write.StartTs = r.uvarint("start ts")
		rec.Write.CommitTs = r.uvarint("commit ts")
		fl := r.byte1("flags")
		rec.Unlock = fl&flagUnlock != 0
		if fl&flagHasValue != 0 {
			rec.Write.Value = r.bytes("value")
			if rec.Write.Value == nil && r.err == nil {
				rec.Write.Value = []byte{}
			}
		}
		if r.err == nil && (rec.Write.Kind < mvcc.WritePut || rec.Write.Kind > mvcc.WriteRollback) {
			r.fail(fmt.Sprintf("bad write kind %d", rec.Write.Kind))
		}
	case TypeLock:
		l := &rec.Lock
		l.Key = r.bytes("key")
		rec.Key = l.Key
		l.Primary = r.bytes("primary")
		l.StartTs = r.uvarint("start ts")
		l.TTL = r.uvarint("ttl")
		l.Op = mvcc.Op(r.byte1("op"))
		fl := r.byte1("flags")
		l.UseAsyncCommit = fl&flagAsync != 0
		if fl&flagHasValue != 0 {
			l.Value = r.bytes("value")
			if l.Value == nil && r.err == nil {
				l.Value = []byte{}
			}
		}
		l.MinCommitTs = r.uvarint("min commit ts")
		n := r.uvarint("secondaries count")
		if r.err == nil && n > uint64(len(p)-r.off) {
			r.fail(fmt.Sprintf("%d secondaries cannot fit in the record", n))
		}
		for i := uint64(0); i < n && r.err == nil; i++ {
			l.Secondaries = append(l.Secondaries, r.bytes("secondary"))
		}
		if r.err == nil && (l.Op < mvcc.OpPut || l.Op > mvcc.OpLock) {
			r.fail(fmt.Sprintf("bad lock op %d", l.Op))
		}
	case TypeDelLock:
		rec.Key = r.bytes("key")
		rec.StartTs = r.uvarint("start ts")
	case TypeGC, TypeTSO:
		rec.Ts = r.uvarint("ts")
	case TypeMeta:
		rec.Key = r.bytes("name")
		rec.Write.Value = r.bytes("value")
	case TypeRegions:
		rec.Ts = r.uvarint("next id")
		n := r.uvarint("region count")
		if r.err == nil && n > uint64(len(p)-r.off) {
			r.fail(fmt.Sprintf("%d regions cannot fit in the record", n))
		}
		for i := uint64(0); i < n && r.err == nil; i++ {
			var g topology.Region
			g.ID = r.uvarint("region id")
			g.StartKey = r.bytes("start key")
			g.EndKey = r.bytes("end key")
			g.ConfVer = r.uvarint("conf ver")
			g.Version = r.uvarint("version")
			g.Leader = r.uvarint("leader")
			np := r.uvarint("peer count")
			if r.err == nil && np > uint64(len(p)-r.off) {
				r.fail(fmt.Sprintf("%d peers cannot fit in the record", np))
			}
			for j := uint64(0); j < np && r.err == nil; j++ {
				g.Peers = append(g.Peers, topology.Peer{ID: r.uvarint("peer id"), StoreID: r.uvarint("peer store")})
			}
			rec.Regions = append(rec.Regions, g)
		}
	default:
		if r.err == nil {
			r.off = 0
			r.fail(fmt.Sprintf("unknown record type %d", p[0]))
		}
	}
	if r.err == nil && r.off != len(p) {
		r.fail(fmt.Sprintf("%d trailing bytes after the %s record", len(p)-r.off, rec.Type))
	}
	if r.err != nil {
		return Record{}, r.err
	}
	return rec, nil
}
