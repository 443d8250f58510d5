package kvlog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// rule: DUR-10 — Verify reads a sound log, reports a torn tail without
// truncating it, names the offset of a damaged record that is not the
// tail, and refuses a log a running cluster holds.
func TestDUR10_VerifyIsReadOnly(t *testing.T) {
	dir := t.TempDir()
	l, _, err := Open(dir, func(int64, Record) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"one", "two", "three"} {
		if err := l.SaveMeta("k", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Verify(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("verify of an open log: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := Verify(dir)
	if err != nil || st.Records != 3 || st.TornBytes != 0 {
		t.Fatalf("sound log: %+v %v", st, err)
	}
	path := filepath.Join(dir, FileName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A torn tail: reported, left in place.
	if err := os.WriteFile(path, append(append([]byte(nil), b...), 7, 0, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err = Verify(dir)
	if fi, _ := os.Stat(path); err != nil || st.Records != 3 || st.TornBytes != 3 || fi.Size() != int64(len(b))+3 {
		t.Fatalf("torn tail: %+v %v", st, err)
	}
	// A damaged record before the last one.
	bad := append([]byte(nil), b...)
	bad[len(Magic)+frameHeader] ^= 0xff
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	var ce *CorruptError
	if _, err := Verify(dir); !errors.As(err, &ce) || ce.Off != int64(len(Magic)) || ce.File != path {
		t.Fatalf("damaged first record: %v", err)
	}
	if _, err := Verify(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing log: %v", err)
	}
}
