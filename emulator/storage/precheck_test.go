package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/docstore"
)

const precheckDocs = 3000

// buildStore writes a real store with enough documents to span hundreds of
// pages and returns its file and the meta bbolt will use on open.
func buildStore(t *testing.T) (string, *boltMeta) {
	t.Helper()
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 200)
	err = db.Update(func(tx *Tx) error {
		if err := tx.PutCollection(&apiv1.CollectionStatus{Definition: &apiv1.CollectionDefinition{Name: "c"}}); err != nil {
			return err
		}
		for i := range precheckDocs {
			e := &docstore.Entry{Version: uint64(i + 1), Partition: "table:1", Fields: map[string]*apiv1.Value{"a": {Kind: &apiv1.Value_StringValue{StringValue: pad}}}}
			if err := tx.PutEntry("c", fmt.Sprint(i), e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	m0, err0 := readMeta(f, st.Size(), 0, 0)
	if err0 != nil {
		t.Fatalf("healthy store, meta 0: %v", err0)
	}
	m1, err1 := readMeta(f, st.Size(), int64(m0.pageSize), 1)
	if err1 != nil {
		t.Fatalf("healthy store, meta 1: %v", err1)
	}
	use := m0
	if m1.txid > m0.txid {
		use = m1
	}
	if use.pgid < 50 {
		t.Fatalf("store too small to truncate mid-data: %d pages", use.pgid)
	}
	return path, use
}

// copyPrefix copies the first n bytes of src into a fresh data dir (a
// truncated copy of the store) and returns that dir.
func copyPrefix(t *testing.T, src string, n int64) string {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, io.LimitReader(in, n)); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// patch overwrites bytes of the store file in dir at off.
func patch(t *testing.T, dir string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, FileName), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// forgeHighWater rewrites a meta page's high-water pgid and recomputes its
// checksum, so only the size check can catch it.
func forgeHighWater(t *testing.T, dir string, off int64, pgid uint64) {
	t.Helper()
	path := filepath.Join(dir, FileName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	body := b[off+boltPageHeader:]
	binary.NativeEndian.PutUint64(body[40:48], pgid)
	h := fnv.New64a()
	_, _ = h.Write(body[:boltSummedLen])
	binary.NativeEndian.PutUint64(body[56:64], h.Sum64())
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// loadCount opens dir and counts the stored documents.
func loadCount(t *testing.T, dir string) int {
	t.Helper()
	db, err := Open(dir)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer db.Close()
	n := 0
	if _, err := db.Load(func(string, string, *docstore.Entry) error { n++; return nil }); err != nil {
		t.Fatalf("load: %v", err)
	}
	return n
}

// rule: E63 — a truncated or damaged store file is refused at Open with an
// error naming the file and what is wrong; it never faults (SIGBUS) inside
// bbolt's mapping or panics. A crash here would kill the test binary.
func TestOpenRefusesDamagedFileE63(t *testing.T) {
	src, m := buildStore(t)
	ps := int64(m.pageSize)
	need := int64(m.pgid) * ps
	flip := []byte{0xff, 0xff, 0xff, 0xff}
	cases := []struct {
		name   string
		size   int64            // bytes of the store kept
		damage func(dir string) // damage after truncation
		want   []string         // substrings of the error
	}{
		{name: "below meta header", size: 10, want: []string{"is 10 bytes", "neither meta page is valid", "file ends at 10"}},
		{name: "inside page 0", size: 2000, want: []string{"is 2000 bytes but its meta page 0 says its pages reach"}},
		{name: "torn page 1", size: ps + 40, want: []string{fmt.Sprintf("is %d bytes but its meta page 0 says its pages reach", ps+40)}},
		{name: "mid data", size: need / 2, want: []string{fmt.Sprintf("is %d bytes but its meta page %d says its pages reach %d bytes", need/2, m.page, need)}},
		{name: "just below high water", size: need - 1, want: []string{fmt.Sprintf("is %d bytes but its meta page %d says its pages reach %d bytes", need-1, m.page, need)}},
		{name: "both checksums", size: need, damage: func(dir string) {
			patch(t, dir, boltPageHeader+48, flip) // txid bytes, meta 0
			patch(t, dir, ps+boltPageHeader+48, flip)
		}, want: []string{"neither meta page is valid", "checksum mismatch at offset 0", fmt.Sprintf("offset from %d", boltMinPageSize)}},
		{name: "both magics", size: need, damage: func(dir string) {
			patch(t, dir, boltPageHeader, flip)
			patch(t, dir, ps+boltPageHeader, flip)
		}, want: []string{"neither meta page is valid", "bad magic 0xffffffff at offset 0"}},
		{name: "both versions", size: need, damage: func(dir string) {
			patch(t, dir, boltPageHeader+4, []byte{9, 0, 0, 0})
			patch(t, dir, ps+boltPageHeader+4, []byte{9, 0, 0, 0})
		}, want: []string{"neither meta page is valid", "format version 9 at offset 0"}},
		{name: "not a bbolt file", size: need, damage: func(dir string) {
			if err := os.WriteFile(filepath.Join(dir, FileName), []byte(strings.Repeat("not bolt ", 1000)), 0o600); err != nil {
				t.Fatal(err)
			}
		}, want: []string{"neither meta page is valid", "is not a meta page"}},
		{name: "forged high water", size: need, damage: func(dir string) {
			forgeHighWater(t, dir, 0, m.pgid+1000)
			forgeHighWater(t, dir, ps, m.pgid+1000)
		}, want: []string{fmt.Sprintf("says its pages reach %d bytes", (int64(m.pgid)+1000)*ps)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyPrefix(t, src, c.size)
			if c.damage != nil {
				c.damage(dir)
			}
			db, err := Open(dir)
			if err == nil {
				db.Close()
				t.Fatalf("E63: damaged store (%s) opened", c.name)
			}
			msg := err.Error()
			if !errors.Is(err, errDamaged) || !strings.Contains(msg, filepath.Join(dir, FileName)) ||
				!strings.Contains(msg, "the file was truncated or damaged") {
				t.Fatalf("E63: error does not name the file and the damage: %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Fatalf("E63: error %q lacks %q", msg, w)
				}
			}
		})
	}
}

// rule: E63 — the bound is exact and recovery still works: a file cut at
// exactly its high-water mark, or with one damaged meta page (bbolt's torn
// meta write, answered by the other meta page), opens with its documents.
func TestOpenAcceptsHealthyFileE63(t *testing.T) {
	src, m := buildStore(t)
	ps := int64(m.pageSize)
	need := int64(m.pgid) * ps
	if n := loadCount(t, filepath.Dir(src)); n != precheckDocs {
		t.Fatalf("E63: healthy store has %d documents, want %d", n, precheckDocs)
	}
	if n := loadCount(t, copyPrefix(t, src, need)); n != precheckDocs {
		t.Fatalf("E63: store cut at its high-water mark has %d documents, want %d", n, precheckDocs)
	}
	// Damage the older meta page: the newer one holds the last commit.
	older := int64(1 - m.page)
	dir := copyPrefix(t, src, need)
	patch(t, dir, older*ps+boltPageHeader+48, []byte{0xff, 0xff, 0xff, 0xff})
	if n := loadCount(t, dir); n != precheckDocs {
		t.Fatalf("E63: store with a damaged older meta page has %d documents, want %d", n, precheckDocs)
	}
	// A missing or empty file is a new store.
	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, FileName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if n := loadCount(t, empty); n != 0 {
		t.Fatalf("E63: empty file has %d documents", n)
	}
	if n := loadCount(t, filepath.Join(t.TempDir(), "new")); n != 0 {
		t.Fatalf("E63: new store has %d documents", n)
	}
}
