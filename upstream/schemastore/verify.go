package schemastore

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
)

// VerifyFile checks a stopped store file offline, read-only (SS57): the
// same checks as an open (SS54: bbolt's page check, format, keyspace,
// timestamp order, checksums, key shapes, record counts and references).
// A file that was never completed (no format tag) is reported like any
// other damage, although an open would recreate it. Damage is a
// *CorruptError; a file held by a running store is an error saying so; a
// missing file wraps os.ErrNotExist.
func VerifyFile(path string) (err error) {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("schemastore: verify: %w", err)
	}
	if err := precheckFile(path); err != nil {
		return err
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &CorruptError{Path: path, Reason: fmt.Sprintf("bbolt: %v", r)}
		}
	}()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second, PreLoadFreelist: true})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return fmt.Errorf("schemastore: verify %s: the file is locked by a running store (stop it first): %w", path, err)
		}
		if errors.Is(err, bolt.ErrInvalid) || errors.Is(err, bolt.ErrChecksum) || errors.Is(err, bolt.ErrVersionMismatch) {
			return &CorruptError{Path: path, Reason: err.Error()}
		}
		return fmt.Errorf("schemastore: verify %s: %w", path, err)
	}
	p := &persister{db: db, path: path}
	defer db.Close()
	if err := p.checkBolt(); err != nil {
		return err
	}
	ok, err := p.isInitialized()
	if err != nil {
		return err
	}
	if !ok {
		return &CorruptError{Path: path, Bucket: "meta", Key: keyFormat, Reason: "missing: the store was never completed (the next open recreates it)"}
	}
	_, _, err = p.load()
	return err
}
