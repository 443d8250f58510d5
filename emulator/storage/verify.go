package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/docstore"
)

// Report is what Verify found in a store file.
type Report struct {
	Path   string
	Format string
	// Records checked, by kind.
	Collections, Partitions, Idempotency, Documents int
	// Damaged lists every damaged record or structure, one line each, at
	// most maxDamaged (Truncated counts the ones left out).
	Damaged   []string
	Truncated int
	// Note says something worth knowing that is not damage.
	Note string
}

// OK reports whether nothing is damaged.
func (r *Report) OK() bool { return len(r.Damaged) == 0 }

const maxDamaged = 100

func (r *Report) add(err error) {
	if len(r.Damaged) < maxDamaged {
		r.Damaged = append(r.Damaged, err.Error())
	} else {
		r.Truncated++
	}
}

// Verify checks the store in dir offline (E65): the file's meta pages and
// size (E63), then every record of every bucket against its checksum and
// its decoding (E64), going on past a damaged record so the report lists
// all of them. It opens the file read-only and changes nothing (a format-1
// or format-2 file is not migrated; its records, which carry no checksum,
// are only decoded). A missing file is an error wrapping os.ErrNotExist;
// a file held by a running emulator is an error saying so. Damage is in
// the report, not the error.
func Verify(dir string) (*Report, error) {
	path := filepath.Join(dir, FileName)
	rep := &Report{Path: path}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("storage: verify %s: %w", path, err)
	}
	if st.Size() == 0 {
		// Open treats an empty file as a new store; nothing was stored.
		return rep, nil
	}
	if err := precheck(path); err != nil {
		if errors.Is(err, errDamaged) {
			rep.add(err)
			return rep, nil
		}
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: lockTimeout})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("storage: verify %s: the file is locked by a running emulator (stop it first): %w", path, err)
		}
		rep.add(fmt.Errorf("storage: open %s: %w", path, err))
		return rep, nil
	}
	defer db.Close()

	err = func() (err error) {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer recoverDamage(path, &err)
		return db.View(func(tx *bolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			if meta == nil {
				return fmt.Errorf("storage: %s: bucket %q is missing", path, bucketMeta)
			}
			rep.Format = string(meta.Get(keyFormat))
			return nil
		})
	}()
	if err != nil {
		rep.add(err)
		return rep, nil
	}
	switch rep.Format {
	case formatVersion:
	case formatNoSums, formatRawKeys:
		err := func() (err error) {
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer recoverDamage(path, &err)
			return verifyLegacy(db, rep)
		}()
		if err != nil {
			rep.add(err)
		}
		return rep, nil
	default:
		rep.add(fmt.Errorf("storage: %s has format %q, this build reads %q", path, rep.Format, formatVersion))
		return rep, nil
	}
	v := visitor{
		collection:  func(*apiv1.CollectionStatus) { rep.Collections++ },
		partition:   func(*apiv1.PartitionState) { rep.Partitions++ },
		idempotency: func([]byte, IdemRecord) { rep.Idempotency++ },
		doc:         func(string, string, *docstore.Entry) error { rep.Documents++; return nil },
		damaged:     func(err error) error { rep.add(err); return nil },
	}
	if err := walkFile(db, path, v); err != nil {
		rep.add(err)
	}
	return rep, nil
}

// verifyLegacy decodes every record of a format-1/2 file, which carries
// no checksums, as migrate will at the next start (a record migrate would
// refuse is damaged).
func verifyLegacy(db *bolt.DB, rep *Report) error {
	rep.Note = fmt.Sprintf("format %s: records carry no checksums (the next start migrates the file to format %s)", rep.Format, formatVersion)
	return db.View(func(tx *bolt.Tx) error {
		for _, top := range []struct {
			bucket []byte
			name   string
			check  func(v []byte) error
			n      *int
		}{
			{bucketCollections, "catalog record of collection", func(v []byte) error { return proto.Unmarshal(v, &apiv1.CollectionStatus{}) }, &rep.Collections},
			{bucketPartitions, "stream state of partition", func(v []byte) error { return proto.Unmarshal(v, &apiv1.PartitionState{}) }, &rep.Partitions},
			{bucketIdempotency, "idempotency record", func(v []byte) error {
				if len(v) < 32 {
					return fmt.Errorf("record is %d bytes, want >= 32", len(v))
				}
				return nil
			}, &rep.Idempotency},
		} {
			b := tx.Bucket(top.bucket)
			if b == nil {
				rep.add(fmt.Errorf("storage: %s: bucket %q is missing", rep.Path, top.bucket))
				continue
			}
			_ = b.ForEach(func(k, v []byte) error {
				if err := top.check(v); err != nil {
					rep.add(fmt.Errorf("storage: %s: %s %q: %w", rep.Path, top.name, k, err))
				} else {
					*top.n++
				}
				return nil
			})
		}
		docs := tx.Bucket(bucketDocs)
		if docs == nil {
			rep.add(fmt.Errorf("storage: %s: bucket %q is missing", rep.Path, bucketDocs))
			return nil
		}
		return docs.ForEachBucket(func(name []byte) error {
			coll := string(name)
			return docs.Bucket(name).ForEach(func(k, v []byte) error {
				pk, err := string(k), error(nil)
				if rep.Format != formatRawKeys {
					pk, err = decodeDocKey(k)
				}
				if err == nil {
					_, err = DecodeEntry(v)
				}
				if err != nil {
					rep.add(fmt.Errorf("storage: %s: collection %q key %q: %w", rep.Path, coll, pk, err))
				} else {
					rep.Documents++
				}
				return nil
			})
		})
	})
}
