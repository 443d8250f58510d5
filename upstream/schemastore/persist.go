package schemastore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// On-disk layout (bbolt, one file per keyspace; rule SS50..SS56):
//
//	meta     fixed keys below
//	dbs      db id (8 BE)                      -> DBInfo JSON
//	tables   logical id (8 BE)                 -> schema id (8 BE) ‖ private TableInfo JSON
//	versions phys id (8) ‖ ts (8) ‖ ver (8)    -> logical id (8) ‖ schema id (8) ‖ flags (1)
//	tinfo    logical id (8) ‖ ts (8) ‖ ver (8) -> public TableInfo JSON
//	events   ts (8) ‖ ver (8) ‖ job id (8)     -> event JSON
//
// Every value is crc32c(payload) (4 BE) ‖ payload. meta/counts holds the
// number of records of each bucket and is updated in the same transaction
// as the records, so a lost or extra record is detected at open.
const formatName = "sfemu-schemastore/1"

var (
	bucketMeta     = []byte("meta")
	bucketDBs      = []byte("dbs")
	bucketTables   = []byte("tables")
	bucketVersions = []byte("versions")
	bucketTInfo    = []byte("tinfo")
	bucketEvents   = []byte("events")
	dataBuckets    = [][]byte{bucketDBs, bucketTables, bucketVersions, bucketTInfo, bucketEvents}

	keyFormat       = []byte("format")
	keyKeyspace     = []byte("keyspace")
	keyGCTs         = []byte("gc_ts")
	keyResolvedTs   = []byte("resolved_ts")
	keyLast         = []byte("last")
	keyCounts       = []byte("counts")
	keyJobTable     = []byte("ddl_job_table")
	keyHistTable    = []byte("ddl_history_table")
	keySnapshotTs   = []byte("snapshot_ts")
	versionFlagDrop = byte(1)
	versionFlagDDL  = byte(2)
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func seal(payload []byte) []byte {
	out := make([]byte, 4, 4+len(payload))
	binary.BigEndian.PutUint32(out, crc32.Checksum(payload, crcTable))
	return append(out, payload...)
}

func unseal(v []byte) ([]byte, error) {
	if len(v) < 4 {
		return nil, fmt.Errorf("value of %d bytes is shorter than its 4-byte checksum", len(v))
	}
	want := binary.BigEndian.Uint32(v)
	if got := crc32.Checksum(v[4:], crcTable); got != want {
		return nil, fmt.Errorf("checksum %08x does not match stored %08x", got, want)
	}
	return v[4:], nil
}

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func key3(a, b, c uint64) []byte {
	k := make([]byte, 24)
	binary.BigEndian.PutUint64(k, a)
	binary.BigEndian.PutUint64(k[8:], b)
	binary.BigEndian.PutUint64(k[16:], c)
	return k
}

func versionKey(phys int64, ts uint64, ver int64) []byte {
	return key3(uint64(phys), ts, uint64(ver))
}
func tinfoKey(logical int64, ts uint64, ver int64) []byte {
	return key3(uint64(logical), ts, uint64(ver))
}
func eventKey(ts uint64, ver int64, jobID int64) []byte { return key3(ts, uint64(ver), uint64(jobID)) }

// tableInfoJSON returns TiDB's bytes when the value was parsed and not
// changed in code, else the marshalled struct.
func tableInfoJSON(ti *model.TableInfo) ([]byte, error) {
	if ti.Raw != nil {
		return ti.Raw, nil
	}
	return json.Marshal(ti)
}

func dbInfoJSON(d *model.DBInfo) ([]byte, error) {
	if d.Raw != nil {
		return d.Raw, nil
	}
	return json.Marshal(d)
}

// eventRecord is the persisted form of a DDLEvent: table infos as raw JSON
// so TiDB's bytes are kept.
type eventRecord struct {
	Event     DDLEvent          `json:"event"`
	TableInfo json.RawMessage   `json:"table_info,omitempty"`
	Multiple  []json.RawMessage `json:"multiple_table_infos,omitempty"`
}

func encodeEvent(ev *DDLEvent) ([]byte, error) {
	rec := eventRecord{Event: *ev}
	rec.Event.TableInfo, rec.Event.MultipleTableInfos = nil, nil
	var err error
	if ev.TableInfo != nil {
		if rec.TableInfo, err = tableInfoJSON(ev.TableInfo); err != nil {
			return nil, err
		}
	}
	for _, ti := range ev.MultipleTableInfos {
		b, err := tableInfoJSON(ti)
		if err != nil {
			return nil, err
		}
		rec.Multiple = append(rec.Multiple, b)
	}
	return json.Marshal(&rec)
}

func decodeEvent(b []byte) (DDLEvent, error) {
	var rec eventRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return DDLEvent{}, err
	}
	ev := rec.Event
	if len(rec.TableInfo) > 0 {
		ti, err := model.ParseTableInfo(rec.TableInfo)
		if err != nil {
			return DDLEvent{}, err
		}
		ev.TableInfo = ti
	}
	for _, raw := range rec.Multiple {
		ti, err := model.ParseTableInfo(raw)
		if err != nil {
			return DDLEvent{}, err
		}
		ev.MultipleTableInfos = append(ev.MultipleTableInfos, ti)
	}
	return ev, nil
}

// counts is meta/counts: records per data bucket, in dataBuckets order.
type counts [5]uint64

func (c counts) encode() []byte {
	b := make([]byte, 0, 40)
	for _, n := range c {
		b = binary.BigEndian.AppendUint64(b, n)
	}
	return b
}

// persister writes history changes to bbolt. Every write is one
// transaction committed with fsync (bbolt's default; NoSync is never set).
type persister struct {
	db   *bolt.DB
	path string
	// failHook, when set (tests), is called before each commit; an error
	// aborts the transaction as a failed write would.
	failHook func() error
}

// txWriter tracks count changes inside one transaction.
type txWriter struct {
	tx *bolt.Tx
	c  counts
}

func (w *txWriter) put(bucket []byte, k, payload []byte) error {
	b := w.tx.Bucket(bucket)
	if b.Get(k) == nil {
		w.c[bucketIndex(bucket)]++
	}
	return b.Put(k, seal(payload))
}

func (w *txWriter) del(bucket []byte, k []byte) error {
	b := w.tx.Bucket(bucket)
	if b.Get(k) != nil {
		w.c[bucketIndex(bucket)]--
	}
	return b.Delete(k)
}

func bucketIndex(name []byte) int {
	for i, b := range dataBuckets {
		if bytes.Equal(b, name) {
			return i
		}
	}
	panic("schemastore: unknown bucket " + string(name))
}

func (w *txWriter) putMeta(k, payload []byte) error {
	return w.tx.Bucket(bucketMeta).Put(k, seal(payload))
}

func readCounts(tx *bolt.Tx) (counts, error) {
	var c counts
	v := tx.Bucket(bucketMeta).Get(keyCounts)
	if v == nil {
		return c, errors.New("meta/counts missing")
	}
	p, err := unseal(v)
	if err != nil {
		return c, fmt.Errorf("meta/counts: %w", err)
	}
	if len(p) != 40 {
		return c, fmt.Errorf("meta/counts has %d bytes, want 40", len(p))
	}
	for i := range c {
		c[i] = binary.BigEndian.Uint64(p[8*i:])
	}
	return c, nil
}

// update runs fn in a write transaction and commits it (fsync).
func (p *persister) update(fn func(w *txWriter) error) error {
	err := p.db.Update(func(tx *bolt.Tx) error {
		c, err := readCounts(tx)
		if err != nil {
			return err
		}
		w := &txWriter{tx: tx, c: c}
		if err := fn(w); err != nil {
			return err
		}
		if err := w.putMeta(keyCounts, w.c.encode()); err != nil {
			return err
		}
		if p.failHook != nil {
			return p.failHook()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("schemastore: write %s: %w", p.path, err)
	}
	return nil
}

// writeChanges persists one applied batch and the new resolved ts.
func (w *txWriter) writeChanges(ch *changeSet, resolvedTs uint64) error {
	for _, id := range sortedKeys(ch.dbDel) {
		if err := w.del(bucketDBs, be64(uint64(id))); err != nil {
			return err
		}
	}
	for _, id := range sortedKeys(ch.dbPut) {
		b, err := dbInfoJSON(ch.dbPut[id])
		if err != nil {
			return err
		}
		if err := w.put(bucketDBs, be64(uint64(id)), b); err != nil {
			return err
		}
	}
	for _, id := range sortedKeys(ch.tableDel) {
		if err := w.del(bucketTables, be64(uint64(id))); err != nil {
			return err
		}
	}
	for _, id := range sortedKeys(ch.tablePut) {
		t := ch.tablePut[id]
		b, err := tableInfoJSON(t.info)
		if err != nil {
			return err
		}
		if err := w.put(bucketTables, be64(uint64(id)), append(be64(uint64(t.schemaID)), b...)); err != nil {
			return err
		}
	}
	written := map[string]bool{}
	for _, r := range ch.versions {
		v := r.v
		flags := byte(0)
		if v.info == nil {
			flags |= versionFlagDrop
		}
		if v.fromDDL {
			flags |= versionFlagDDL
		}
		val := append(append(be64(uint64(v.logicalID)), be64(uint64(v.schemaID))...), flags)
		if err := w.put(bucketVersions, versionKey(r.physID, v.ts, v.ver), val); err != nil {
			return err
		}
		if v.info == nil {
			continue
		}
		tk := tinfoKey(v.logicalID, v.ts, v.ver)
		if written[string(tk)] {
			continue
		}
		written[string(tk)] = true
		b, err := tableInfoJSON(v.info)
		if err != nil {
			return err
		}
		if err := w.put(bucketTInfo, tk, b); err != nil {
			return err
		}
	}
	for i := range ch.events {
		ev := &ch.events[i]
		b, err := encodeEvent(ev)
		if err != nil {
			return err
		}
		if err := w.put(bucketEvents, eventKey(ev.FinishedTs, ev.SchemaVersion, ev.JobID), b); err != nil {
			return err
		}
	}
	if ch.lastSet {
		if err := w.putMeta(keyLast, append(be64(ch.last.ts), be64(uint64(ch.last.ver))...)); err != nil {
			return err
		}
	}
	return w.putMeta(keyResolvedTs, be64(resolvedTs))
}

// writeGC deletes what GC dropped and the tinfo records no version
// references any more, and records the new GC ts.
func (w *txWriter) writeGC(g gcChanges, referenced map[string]bool, gcTs uint64) error {
	for _, k := range g.versions {
		if err := w.del(bucketVersions, k); err != nil {
			return err
		}
	}
	for _, k := range g.events {
		if err := w.del(bucketEvents, k); err != nil {
			return err
		}
	}
	var stale [][]byte
	c := w.tx.Bucket(bucketTInfo).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if !referenced[string(k)] {
			stale = append(stale, append([]byte(nil), k...))
		}
	}
	for _, k := range stale {
		if err := w.del(bucketTInfo, k); err != nil {
			return err
		}
	}
	return w.putMeta(keyGCTs, be64(gcTs))
}

func sortedKeys[V any](m map[int64]V) []int64 {
	ids := make([]int64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	return sortInt64s(ids)
}

// storedState is what open reads back besides the history.
type storedState struct {
	keyspace   uint32
	snapshotTs uint64
	jobTable   *model.TableInfo
	histTable  *model.TableInfo
}

// initialize writes a fresh store in one transaction: buckets, keyspace,
// snapshot ts, the DDL job table layouts, the snapshot's records and, last,
// the format tag. A crash before the commit leaves no usable store, so a
// half-written snapshot can never be loaded (rule SS54).
func (p *persister) initialize(keyspace uint32, snapshotTs uint64, jobTable, histTable *model.TableInfo, snap *changeSet) error {
	err := p.db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		for _, b := range dataBuckets {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		put := func(k, v []byte) error { return meta.Put(k, seal(v)) }
		jt, err := tableInfoJSON(jobTable)
		if err != nil {
			return err
		}
		if err := put(keyJobTable, jt); err != nil {
			return err
		}
		if histTable != nil {
			ht, err := tableInfoJSON(histTable)
			if err != nil {
				return err
			}
			if err := put(keyHistTable, ht); err != nil {
				return err
			}
		}
		for _, kv := range [][2][]byte{
			{keyKeyspace, binary.BigEndian.AppendUint32(nil, keyspace)},
			{keySnapshotTs, be64(snapshotTs)},
			{keyGCTs, be64(snapshotTs)},
			{keyResolvedTs, be64(snapshotTs)},
			{keyLast, append(be64(snapshotTs), be64(math.MaxInt64)...)},
		} {
			if err := put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		w := &txWriter{tx: tx}
		if err := w.writeChanges(snap, snapshotTs); err != nil {
			return err
		}
		if err := put(keyCounts, w.c.encode()); err != nil {
			return err
		}
		if p.failHook != nil {
			if err := p.failHook(); err != nil {
				return err
			}
		}
		// format is written last: a store without it was never completed.
		return put(keyFormat, []byte(formatName))
	})
	if err != nil {
		return fmt.Errorf("schemastore: initialize %s: %w", p.path, err)
	}
	return nil
}

// isInitialized reports whether the file holds a completed store.
func (p *persister) isInitialized() (bool, error) {
	var ok bool
	err := p.db.View(func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		ok = m != nil && m.Get(keyFormat) != nil
		if m == nil && tx.Bucket(bucketDBs) == nil {
			return nil
		}
		if !ok {
			return &CorruptError{Path: p.path, Reason: "store was created but never completed (no meta/format)"}
		}
		return nil
	})
	return ok, err
}

func corrupt(path, bucket string, key []byte, format string, args ...any) error {
	// key may point into bbolt's mmap, which is gone after the transaction.
	if key != nil {
		key = append([]byte(nil), key...)
	}
	return &CorruptError{Path: path, Bucket: bucket, Key: key, Reason: fmt.Sprintf(format, args...)}
}

// load reads and verifies the whole store and rebuilds the history.
func (p *persister) load() (*history, *storedState, error) {
	h := newHistory()
	st := &storedState{}
	err := p.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return corrupt(p.path, "", nil, "meta bucket missing")
		}
		getMeta := func(k []byte, size int) ([]byte, error) {
			v := meta.Get(k)
			if v == nil {
				return nil, corrupt(p.path, "meta", k, "missing")
			}
			pl, err := unseal(v)
			if err != nil {
				return nil, corrupt(p.path, "meta", k, "%v", err)
			}
			if size >= 0 && len(pl) != size {
				return nil, corrupt(p.path, "meta", k, "has %d bytes, want %d", len(pl), size)
			}
			return pl, nil
		}
		f, err := getMeta(keyFormat, -1)
		if err != nil {
			return err
		}
		if string(f) != formatName {
			return corrupt(p.path, "meta", keyFormat, "format %q, want %q", f, formatName)
		}
		ks, err := getMeta(keyKeyspace, 4)
		if err != nil {
			return err
		}
		st.keyspace = binary.BigEndian.Uint32(ks)
		u64 := func(k []byte) (uint64, error) {
			v, err := getMeta(k, 8)
			if err != nil {
				return 0, err
			}
			return binary.BigEndian.Uint64(v), nil
		}
		if st.snapshotTs, err = u64(keySnapshotTs); err != nil {
			return err
		}
		if h.gcTs, err = u64(keyGCTs); err != nil {
			return err
		}
		if h.resolvedTs, err = u64(keyResolvedTs); err != nil {
			return err
		}
		last, err := getMeta(keyLast, 16)
		if err != nil {
			return err
		}
		h.last = jobPos{ts: binary.BigEndian.Uint64(last), ver: int64(binary.BigEndian.Uint64(last[8:]))}
		jt, err := getMeta(keyJobTable, -1)
		if err != nil {
			return err
		}
		if st.jobTable, err = model.ParseTableInfo(jt); err != nil {
			return corrupt(p.path, "meta", keyJobTable, "%v", err)
		}
		if v := meta.Get(keyHistTable); v != nil {
			ht, err := getMeta(keyHistTable, -1)
			if err != nil {
				return err
			}
			if st.histTable, err = model.ParseTableInfo(ht); err != nil {
				return corrupt(p.path, "meta", keyHistTable, "%v", err)
			}
		}
		want, err := readCounts(tx)
		if err != nil {
			return corrupt(p.path, "meta", keyCounts, "%v", err)
		}
		if h.gcTs < st.snapshotTs || h.resolvedTs < h.gcTs || h.last.ts > h.resolvedTs {
			return corrupt(p.path, "meta", nil, "timestamps out of order: snapshot %d, gc %d, resolved %d, last applied %d",
				st.snapshotTs, h.gcTs, h.resolvedTs, h.last.ts)
		}
		return p.loadData(tx, h, want)
	})
	if err != nil {
		return nil, nil, err
	}
	return h, st, nil
}

func (p *persister) loadData(tx *bolt.Tx, h *history, want counts) error {
	var got counts
	each := func(bucket []byte, keyLen int, fn func(k, v []byte) error) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return corrupt(p.path, string(bucket), nil, "bucket missing")
		}
		return b.ForEach(func(k, v []byte) error {
			got[bucketIndex(bucket)]++
			if len(k) != keyLen {
				return corrupt(p.path, string(bucket), k, "key has %d bytes, want %d", len(k), keyLen)
			}
			pl, err := unseal(v)
			if err != nil {
				return corrupt(p.path, string(bucket), k, "%v", err)
			}
			if err := fn(k, pl); err != nil {
				var ce *CorruptError
				if errors.As(err, &ce) {
					return err
				}
				return corrupt(p.path, string(bucket), k, "%v", err)
			}
			return nil
		})
	}
	if err := each(bucketDBs, 8, func(k, v []byte) error {
		d, err := model.ParseDBInfo(v)
		if err != nil {
			return err
		}
		if uint64(d.ID) != binary.BigEndian.Uint64(k) {
			return fmt.Errorf("db info has id %d", d.ID)
		}
		h.dbs[d.ID] = d
		return nil
	}); err != nil {
		return err
	}
	// A table's private info is usually byte-identical to its newest
	// public version: parse once, clone for the other (much cheaper).
	byBytes := map[string]*model.TableInfo{}
	infos := map[string]*model.TableInfo{}
	if err := each(bucketTInfo, 24, func(k, v []byte) error {
		ti, err := model.ParseTableInfo(v)
		if err != nil {
			return err
		}
		byBytes[string(v)] = ti
		if uint64(ti.ID) != binary.BigEndian.Uint64(k) {
			return fmt.Errorf("table info has id %d", ti.ID)
		}
		infos[string(k)] = ti
		return nil
	}); err != nil {
		return err
	}
	if err := each(bucketTables, 8, func(k, v []byte) error {
		if len(v) < 8 {
			return errors.New("table record shorter than its schema id")
		}
		var ti *model.TableInfo
		if pub := byBytes[string(v[8:])]; pub != nil {
			ti = pub.Clone()
		} else {
			var err error
			if ti, err = model.ParseTableInfo(v[8:]); err != nil {
				return err
			}
		}
		if uint64(ti.ID) != binary.BigEndian.Uint64(k) {
			return fmt.Errorf("table info has id %d", ti.ID)
		}
		schemaID := int64(binary.BigEndian.Uint64(v))
		if h.dbs[schemaID] == nil {
			return fmt.Errorf("table %d belongs to schema %d, which the store does not have", ti.ID, schemaID)
		}
		h.tables[ti.ID] = &tableState{schemaID: schemaID, info: ti}
		return nil
	}); err != nil {
		return err
	}
	used := map[string]bool{}
	if err := each(bucketVersions, 24, func(k, v []byte) error {
		if len(v) != 17 {
			return fmt.Errorf("version record has %d bytes, want 17", len(v))
		}
		phys := int64(binary.BigEndian.Uint64(k))
		ver := tableVersion{
			ts:        binary.BigEndian.Uint64(k[8:]),
			ver:       int64(binary.BigEndian.Uint64(k[16:])),
			logicalID: int64(binary.BigEndian.Uint64(v)),
			schemaID:  int64(binary.BigEndian.Uint64(v[8:])),
			fromDDL:   v[16]&versionFlagDDL != 0,
		}
		if v[16]&versionFlagDrop == 0 {
			tk := tinfoKey(ver.logicalID, ver.ts, ver.ver)
			ver.info = infos[string(tk)]
			if ver.info == nil {
				return fmt.Errorf("version of table %d at %d refers to missing table info %x", phys, ver.ts, tk)
			}
			used[string(tk)] = true
		}
		if ver.ts > h.resolvedTs {
			return fmt.Errorf("version at ts %d is above the resolved ts %d", ver.ts, h.resolvedTs)
		}
		pt := h.physical[phys]
		if pt == nil {
			pt = &physTable{}
			h.physical[phys] = pt
		}
		pt.versions = append(pt.versions, ver)
		return nil
	}); err != nil {
		return err
	}
	if len(used) != len(infos) {
		return corrupt(p.path, string(bucketTInfo), nil, "%d table infos are not referenced by any version", len(infos)-len(used))
	}
	if err := each(bucketEvents, 24, func(k, v []byte) error {
		ev, err := decodeEvent(v)
		if err != nil {
			return err
		}
		if !bytes.Equal(k, eventKey(ev.FinishedTs, ev.SchemaVersion, ev.JobID)) {
			return fmt.Errorf("event of job %d at %d does not match its key", ev.JobID, ev.FinishedTs)
		}
		if ev.FinishedTs <= h.gcTs || ev.FinishedTs > h.resolvedTs {
			return fmt.Errorf("event at ts %d outside (gc ts %d, resolved ts %d]", ev.FinishedTs, h.gcTs, h.resolvedTs)
		}
		if (jobPos{ev.FinishedTs, ev.SchemaVersion}).less(jobPos{}) || h.last.less(jobPos{ev.FinishedTs, ev.SchemaVersion}) {
			return fmt.Errorf("event (%d, %d) is after the last applied job (%d, %d)", ev.FinishedTs, ev.SchemaVersion, h.last.ts, h.last.ver)
		}
		h.events = append(h.events, ev)
		return nil
	}); err != nil {
		return err
	}
	if got != want {
		return corrupt(p.path, "meta", keyCounts, "record counts %v do not match the recorded %v (records lost or added outside a transaction)", got, want)
	}
	// Every live table's physical ids must currently point at it.
	for id, t := range h.tables {
		for _, phys := range t.info.PhysicalIDs() {
			pt := h.physical[phys]
			if pt == nil || len(pt.versions) == 0 {
				return corrupt(p.path, string(bucketVersions), be64(uint64(phys)), "live table %d has no versions for physical id %d", id, phys)
			}
			v := pt.versions[len(pt.versions)-1]
			if v.info == nil || v.logicalID != id {
				return corrupt(p.path, string(bucketVersions), be64(uint64(phys)), "newest version of physical id %d is not live table %d", phys, id)
			}
		}
	}
	sort.SliceStable(h.events, func(i, j int) bool {
		return jobPos{h.events[i].FinishedTs, h.events[i].SchemaVersion}.less(jobPos{h.events[j].FinishedTs, h.events[j].SchemaVersion})
	})
	return nil
}
