package schemastore

import (
	"errors"
	"os"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// rule: SS57 — VerifyFile passes a sound store, names the bucket and the
// problem of a damaged one, changes nothing, and refuses a running one.
func TestSS57_VerifyFile(t *testing.T) {
	e := baseEnv(t)
	sampleHistory(e)
	path := e.store.Path(0)
	if err := VerifyFile(path); err == nil || !strings.Contains(err.Error(), "stop it first") {
		t.Fatalf("verify of an open store: %v", err)
	}
	e.closeStore()
	if err := VerifyFile(path); err != nil {
		t.Fatalf("sound store: %v", err)
	}
	e.mutateBolt(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTInfo)
		k, v := b.Cursor().First()
		v = append([]byte(nil), v...)
		v[len(v)-2] ^= 0x20
		return b.Put(append([]byte(nil), k...), v)
	})
	before, _ := os.ReadFile(path)
	err := VerifyFile(path)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Bucket != string(bucketTInfo) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("damaged store: %v", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("VerifyFile changed the file")
	}
	if err := VerifyFile(path + ".missing"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}
