package storage

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// migrate rewrites a format-1 or format-2 file as format 3 inside the
// caller's transaction (E64): every value gets its checksum, and format-1
// document keys (the raw primary key) get their length prefix. It runs in
// Open's transaction, so a crash or an error leaves the old file untouched.
// Old records carry no checksum, so each is decoded before it is sealed: a
// record that does not decode is refused (naming it) instead of being
// sealed as if it were sound.
func migrate(tx *bolt.Tx, path, from string) error {
	fail := func(what string, err error) error {
		return fmt.Errorf("storage: %s: migrating format %s to %s: %s: %w", path, from, formatVersion, what, err)
	}
	type kv struct{ k, v []byte }
	// bbolt forbids writing a bucket while iterating it: copy first.
	collect := func(b *bolt.Bucket) []kv {
		var out []kv
		_ = b.ForEach(func(k, v []byte) error {
			if v != nil {
				out = append(out, kv{append([]byte(nil), k...), append([]byte(nil), v...)})
			}
			return nil
		})
		return out
	}
	for _, top := range []struct {
		bucket, scope []byte
		check         func(v []byte) error
		name          string
	}{
		{bucketCollections, scopeCollections, func(v []byte) error { return proto.Unmarshal(v, &apiv1.CollectionStatus{}) }, "catalog record of collection"},
		{bucketPartitions, scopePartitions, func(v []byte) error { return proto.Unmarshal(v, &apiv1.PartitionState{}) }, "stream state of partition"},
		{bucketIdempotency, scopeIdempotency, func(v []byte) error {
			if len(v) < 32 {
				return fmt.Errorf("record is %d bytes, want >= 32", len(v))
			}
			return nil
		}, "idempotency record"},
	} {
		b := tx.Bucket(top.bucket)
		for _, r := range collect(b) {
			if err := top.check(r.v); err != nil {
				return fail(fmt.Sprintf("%s %q", top.name, r.k), err)
			}
			if err := b.Put(r.k, seal(top.scope, r.k, r.v)); err != nil {
				return fail(fmt.Sprintf("%s %q", top.name, r.k), err)
			}
		}
	}
	docs := tx.Bucket(bucketDocs)
	var names [][]byte
	if err := docs.ForEachBucket(func(name []byte) error {
		names = append(names, append([]byte(nil), name...))
		return nil
	}); err != nil {
		return fail("list collections", err)
	}
	for _, name := range names {
		coll := string(name)
		b := docs.Bucket(name)
		records := collect(b)
		// Keys change in format 1, so the bucket is rebuilt.
		if err := docs.DeleteBucket(name); err != nil {
			return fail(fmt.Sprintf("collection %q", coll), err)
		}
		nb, err := docs.CreateBucket(name)
		if err != nil {
			return fail(fmt.Sprintf("collection %q", coll), err)
		}
		nb.FillPercent = docFillPercent
		scope := docScope(coll)
		for _, r := range records {
			pk := string(r.k)
			if from != formatRawKeys {
				if pk, err = decodeDocKey(r.k); err != nil {
					return fail(fmt.Sprintf("collection %q", coll), err)
				}
			}
			if _, err := DecodeEntry(r.v); err != nil {
				return fail(fmt.Sprintf("collection %q key %q", coll, pk), err)
			}
			k := docKey(pk)
			if err := nb.Put(k, seal(scope, k, r.v)); err != nil {
				return fail(fmt.Sprintf("collection %q key %q", coll, pk), err)
			}
		}
	}
	return tx.Bucket(bucketMeta).Put(keyFormat, []byte(formatVersion))
}
