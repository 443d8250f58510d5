package emulator

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/searchfabric/sfemu/emulator/storage"
)

// rule: E64 — the reproduction from issue 20: 7 bytes overwritten inside a
// stored document value. Open refuses the store, naming the collection,
// the key and the file, instead of starting and serving the document.
func TestE64_OpenRefusesDamagedDocument(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const body = "seven-bytes-will-be-overwritten-here"
	lin := mustCreate(t, e, docDef("docs"), 10)
	mustIngest(t, e, mb("table:200", 1, lin.GetSchemaGenerationToken(), docUpsert(1, 20, 1, "untouched"), docUpsert(2, 21, 77, body)))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, storage.FileName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := bytes.Index(b, []byte(body)); i >= 0; i = bytes.Index(b, []byte(body)) {
		copy(b[i+6:i+13], "XXXXXXX")
		n++
	}
	if n == 0 {
		t.Fatal("document value not found in the store file")
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	e2, err := Open(dir, Options{})
	if err == nil {
		defer e2.Close()
		t.Fatal("a store with a damaged document opened")
	}
	for _, want := range []string{`collection "docs"`, `key "77"`, path, "checksum mismatch"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}
