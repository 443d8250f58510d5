package storage

import (
	"bytes"
	"fmt"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/docstore"
)

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
// docFn for every stored document entry of every collection. Every record
// is checked against its checksum first (E64): the first damaged one fails
// Load with an error naming the file, the collection (or partition) and the
// key, and is never handed to docFn or returned.
func (d *DB) Load(docFn func(collection, pk string, e *docstore.Entry) error) (*Snapshot, error) {
	snap := &Snapshot{Idempotency: map[string]IdemRecord{}}
	v := visitor{
		collection: func(rec *apiv1.CollectionStatus) { snap.Collections = append(snap.Collections, rec) },
		partition:  func(ps *apiv1.PartitionState) { snap.Partitions = append(snap.Partitions, ps) },
		idempotency: func(k []byte, r IdemRecord) {
			snap.Idempotency[string(k)] = r
		},
		doc: docFn,
		// The first damaged record stops the load.
		damaged: func(err error) error { return err },
	}
	if err := walkFile(d.db, d.path, v); err != nil {
		return nil, err
	}
	return snap, nil
}

// visitor receives the decoded records of walk. damaged gets each record
// that fails its checksum or decoding; a non-nil return stops the walk.
// An error from doc stops it too.
type visitor struct {
	collection  func(*apiv1.CollectionStatus)
	partition   func(*apiv1.PartitionState)
	idempotency func(key []byte, r IdemRecord)
	doc         func(collection, pk string, e *docstore.Entry) error
	damaged     func(error) error
}

// walkFile runs walk in a read transaction. bbolt trusts its pages: a
// damaged branch or leaf page can make it index out of range or read past
// the mapping, so both are turned into an error naming the file instead of
// killing the process (a fault inside the mapping becomes a panic under
// SetPanicOnFault, which is then recovered here).
func walkFile(db *bolt.DB, path string, v visitor) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverDamage(path, &err)
	return db.View(func(tx *bolt.Tx) error { return walk(tx, path, v) })
}

// recoverDamage turns a panic inside bbolt (deferred by the caller) into
// an error naming the file.
func recoverDamage(path string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("storage: %s: the file's page structure is damaged (%v): %w", path, r, errDamaged)
	}
}

func walk(tx *bolt.Tx, path string, v visitor) error {
	bucket := func(name []byte) (*bolt.Bucket, error) {
		b := tx.Bucket(name)
		if b == nil {
			return nil, v.damaged(fmt.Errorf("storage: %s: bucket %q is missing: %w", path, name, errDamaged))
		}
		return b, nil
	}
	// A nil bucket after a nil error: damaged() chose to go on.
	if b, err := bucket(bucketCollections); err != nil {
		return err
	} else if b != nil {
		err := b.ForEach(func(k, val []byte) error {
			rec := &apiv1.CollectionStatus{}
			if err := unsealProto(scopeCollections, k, val, rec); err != nil {
				return v.damaged(fmt.Errorf("storage: %s: catalog record of collection %q: %w", path, k, err))
			}
			v.collection(rec)
			return nil
		})
		if err != nil {
			return err
		}
	}
	if b, err := bucket(bucketPartitions); err != nil {
		return err
	} else if b != nil {
		err := b.ForEach(func(k, val []byte) error {
			ps := &apiv1.PartitionState{}
			if err := unsealProto(scopePartitions, k, val, ps); err != nil {
				return v.damaged(fmt.Errorf("storage: %s: stream state of partition %q: %w", path, k, err))
			}
			v.partition(ps)
			return nil
		})
		if err != nil {
			return err
		}
	}
	if b, err := bucket(bucketIdempotency); err != nil {
		return err
	} else if b != nil {
		err := b.ForEach(func(k, val []byte) error {
			r, err := decodeIdem(k, val)
			if err != nil {
				client, key, _ := bytes.Cut(k, []byte{0})
				return v.damaged(fmt.Errorf("storage: %s: idempotency record of client %q key %q: %w", path, client, key, err))
			}
			v.idempotency(k, r)
			return nil
		})
		if err != nil {
			return err
		}
	}
	docs, err := bucket(bucketDocs)
	if err != nil || docs == nil {
		return err
	}
	return docs.ForEach(func(name, val []byte) error {
		coll := string(name)
		b := docs.Bucket(name)
		if b == nil || val != nil {
			return v.damaged(fmt.Errorf("storage: %s: collection %q: a value where its document bucket should be: %w", path, coll, errDamaged))
		}
		scope := docScope(coll)
		var dec Decoder // rows of one collection share their layouts
		return b.ForEach(func(k, val []byte) error {
			pk, err := decodeDocKey(k)
			if err != nil {
				return v.damaged(fmt.Errorf("storage: %s: collection %q: %w (%w)", path, coll, err, errDamaged))
			}
			if val == nil {
				return v.damaged(fmt.Errorf("storage: %s: collection %q key %q: a nested bucket where a document should be: %w", path, coll, pk, errDamaged))
			}
			payload, err := unseal(scope, k, val)
			if err != nil {
				return v.damaged(fmt.Errorf("storage: %s: collection %q key %q: %w", path, coll, pk, err))
			}
			e, err := dec.Decode(payload)
			if err != nil {
				return v.damaged(fmt.Errorf("storage: %s: collection %q key %q: %w (%w)", path, coll, pk, err, errDamaged))
			}
			if v.doc == nil {
				return nil
			}
			return v.doc(coll, pk, e)
		})
	})
}

func unsealProto(scope, k, val []byte, m proto.Message) error {
	payload, err := unseal(scope, k, val)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(payload, m); err != nil {
		return fmt.Errorf("undecodable record: %w (%w)", err, errDamaged)
	}
	return nil
}

func decodeIdem(k, val []byte) (IdemRecord, error) {
	var r IdemRecord
	payload, err := unseal(scopeIdempotency, k, val)
	if err != nil {
		return r, err
	}
	if len(payload) < 32 {
		return r, fmt.Errorf("record is %d bytes, want >= 32 (%w)", len(payload), errDamaged)
	}
	copy(r.Digest[:], payload[:32])
	r.Response = append([]byte(nil), payload[32:]...)
	return r, nil
}
