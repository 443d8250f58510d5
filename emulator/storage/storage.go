// Package storage is the emulator's durable state in one bbolt file
// (specs/emulator-contract.md E60, E61): the catalog (definition, lineage and
// state per collection name), idempotency records, per-partition stream
// state, and each collection's documents and tombstones.
//
// Every Update is one bbolt transaction, fsynced before it returns. The
// emulator keeps its working state in memory and writes through; Load reads
// everything back on open.
package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/docstore"
)

// lockTimeout bounds the wait for bbolt's file lock.
var lockTimeout = 2 * time.Second

// FileName is the bbolt file inside the data directory.
const FileName = "emulator.db"

const formatVersion = "1"

var (
	bucketMeta        = []byte("meta")
	bucketCollections = []byte("collections")
	bucketPartitions  = []byte("partitions")
	bucketIdempotency = []byte("idempotency")
	bucketDocs        = []byte("docs") // holds one nested bucket per collection
	keyFormat         = []byte("format")
)

// Document record prefixes.
const (
	recLive      = 'D'
	recTombstone = 'T'
)

// DB is an open store.
type DB struct {
	db *bolt.DB
}

// Open opens or creates the store in dir.
func Open(dir string) (*DB, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("storage: create data dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	// Timeout: a second process holding the file lock fails Open instead
	// of blocking it forever.
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType, Timeout: lockTimeout})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("storage: open %s: file is locked by another emulator (waited %s): %w", path, lockTimeout, err)
		}
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketCollections, bucketPartitions, bucketIdempotency, bucketDocs} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(keyFormat); v == nil {
			return meta.Put(keyFormat, []byte(formatVersion))
		} else if string(v) != formatVersion {
			return fmt.Errorf("storage: %s has format %q, this build reads %q", path, v, formatVersion)
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &DB{db: db}, nil
}

// Close closes the file.
func (d *DB) Close() error { return d.db.Close() }

// Tx is one write transaction.
type Tx struct {
	tx *bolt.Tx
}

// Update runs fn in one transaction and commits (fsync) when fn returns nil.
func (d *DB) Update(fn func(*Tx) error) error {
	return d.db.Update(func(tx *bolt.Tx) error { return fn(&Tx{tx: tx}) })
}

// PutCollection stores the catalog record of a collection name. Only the
// definition, lineage and state of rec are meaningful.
func (t *Tx) PutCollection(rec *apiv1.CollectionStatus) error {
	b, err := proto.Marshal(rec)
	if err != nil {
		return err
	}
	return t.tx.Bucket(bucketCollections).Put([]byte(rec.GetDefinition().GetName()), b)
}

// PutPartition stores a partition's stream state.
func (t *Tx) PutPartition(ps *apiv1.PartitionState) error {
	b, err := proto.Marshal(ps)
	if err != nil {
		return err
	}
	return t.tx.Bucket(bucketPartitions).Put([]byte(ps.GetSourcePartition()), b)
}

// DeletePartition forgets a partition's stream state.
func (t *Tx) DeletePartition(name string) error {
	return t.tx.Bucket(bucketPartitions).Delete([]byte(name))
}

// IdempotencyKey is the storage key of (client id, idempotency key).
func IdempotencyKey(clientID, key string) []byte {
	out := make([]byte, 0, len(clientID)+1+len(key))
	out = append(out, clientID...)
	out = append(out, 0)
	return append(out, key...)
}

// PutIdempotency stores the digest of an accepted request and its response.
func (t *Tx) PutIdempotency(key []byte, digest [32]byte, resp []byte) error {
	v := make([]byte, 0, 32+len(resp))
	v = append(v, digest[:]...)
	v = append(v, resp...)
	return t.tx.Bucket(bucketIdempotency).Put(key, v)
}

func (t *Tx) docs(collection string) (*bolt.Bucket, error) {
	b, err := t.tx.Bucket(bucketDocs).CreateBucketIfNotExists([]byte(collection))
	if err != nil {
		return nil, err
	}
	// Fuller pages mean fewer pages written (and fsynced) per batch; keys
	// from auto-increment ids arrive mostly in order.
	b.FillPercent = docFillPercent
	return b, nil
}

// docFillPercent is the bbolt split threshold for document buckets.
var docFillPercent = 0.9

// ClearDocs removes every document and tombstone of a collection.
func (t *Tx) ClearDocs(collection string) error {
	err := t.tx.Bucket(bucketDocs).DeleteBucket([]byte(collection))
	if errors.Is(err, bolt.ErrBucketNotFound) {
		return nil
	}
	return err
}

// PutEntry stores the entry of one primary key.
func (t *Tx) PutEntry(collection, pk string, e *docstore.Entry) error {
	b, err := t.docs(collection)
	if err != nil {
		return err
	}
	// bbolt keeps references to keys and values until commit: no reuse.
	v, err := EncodeEntry(nil, e)
	if err != nil {
		return fmt.Errorf("storage: collection %q key %q: %w", collection, pk, err)
	}
	return b.Put([]byte(pk), v)
}

// DeleteEntry forgets one primary key.
func (t *Tx) DeleteEntry(collection, pk string) error {
	b, err := t.docs(collection)
	if err != nil {
		return err
	}
	return b.Delete([]byte(pk))
}

// EncodeEntry appends the record form of e to dst. It fails only for
// values protobuf cannot encode (invalid UTF-8), which ingest rejects first.
func EncodeEntry(dst []byte, e *docstore.Entry) ([]byte, error) {
	if e.Deleted {
		dst = append(dst, recTombstone)
		return binary.AppendUvarint(dst, e.Version), nil
	}
	dst = append(dst, recLive)
	doc := &apiv1.Document{Fields: e.Fields, CommitTs: e.Version, SourcePartition: e.Partition}
	out, err := proto.MarshalOptions{}.MarshalAppend(dst, doc)
	if err != nil {
		return nil, fmt.Errorf("marshal document: %w", err)
	}
	return out, nil
}

// DecodeEntry parses a record written by EncodeEntry.
func DecodeEntry(b []byte) (*docstore.Entry, error) {
	if len(b) == 0 {
		return nil, errors.New("storage: empty document record")
	}
	switch b[0] {
	case recTombstone:
		v, n := binary.Uvarint(b[1:])
		if n <= 0 || 1+n != len(b) {
			return nil, fmt.Errorf("storage: bad tombstone record (%d bytes)", len(b))
		}
		return &docstore.Entry{Version: v, Deleted: true}, nil
	case recLive:
		var doc apiv1.Document
		if err := proto.Unmarshal(b[1:], &doc); err != nil {
			return nil, fmt.Errorf("storage: bad document record: %w", err)
		}
		return &docstore.Entry{Version: doc.GetCommitTs(), Fields: doc.GetFields(), Partition: doc.GetSourcePartition()}, nil
	}
	return nil, fmt.Errorf("storage: unknown document record type %q at offset 0", b[0])
}

// Snapshot is everything Load read.
type Snapshot struct {
	Collections []*apiv1.CollectionStatus
	Partitions  []*apiv1.PartitionState
	// Idempotency maps the storage key to (digest, response bytes).
	Idempotency map[string]IdemRecord
}

// IdemRecord is a stored idempotency entry.
type IdemRecord struct {
	Digest   [32]byte
	Response []byte
}

// Load reads the catalog, partitions and idempotency records, and calls
// docFn for every stored document entry of every collection.
func (d *DB) Load(docFn func(collection, pk string, e *docstore.Entry) error) (*Snapshot, error) {
	snap := &Snapshot{Idempotency: map[string]IdemRecord{}}
	err := d.db.View(func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketCollections).ForEach(func(k, v []byte) error {
			rec := &apiv1.CollectionStatus{}
			if err := proto.Unmarshal(v, rec); err != nil {
				return fmt.Errorf("storage: collection record %q: %w", k, err)
			}
			snap.Collections = append(snap.Collections, rec)
			return nil
		})
		if err != nil {
			return err
		}
		err = tx.Bucket(bucketPartitions).ForEach(func(k, v []byte) error {
			ps := &apiv1.PartitionState{}
			if err := proto.Unmarshal(v, ps); err != nil {
				return fmt.Errorf("storage: partition record %q: %w", k, err)
			}
			snap.Partitions = append(snap.Partitions, ps)
			return nil
		})
		if err != nil {
			return err
		}
		err = tx.Bucket(bucketIdempotency).ForEach(func(k, v []byte) error {
			if len(v) < 32 {
				return fmt.Errorf("storage: idempotency record %q is %d bytes, want >= 32", k, len(v))
			}
			var r IdemRecord
			copy(r.Digest[:], v[:32])
			r.Response = append([]byte(nil), v[32:]...)
			snap.Idempotency[string(k)] = r
			return nil
		})
		if err != nil {
			return err
		}
		docs := tx.Bucket(bucketDocs)
		return docs.ForEachBucket(func(name []byte) error {
			coll := string(name)
			return docs.Bucket(name).ForEach(func(k, v []byte) error {
				e, err := DecodeEntry(v)
				if err != nil {
					return fmt.Errorf("collection %q key %q: %w", coll, k, err)
				}
				return docFn(coll, string(k), e)
			})
		})
	})
	if err != nil {
		return nil, err
	}
	return snap, nil
}
