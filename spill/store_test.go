// Tests for the run files (specs/minicdc.md RS4, RS6, RS7).
package spill

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/memquota"
	"github.com/searchfabric/sfemu/reorder"
)

// strCodec stores a string as its bytes.
type strCodec struct{}

func (strCodec) Append(dst []byte, v string) ([]byte, error) { return append(dst, v...), nil }
func (strCodec) Decode(src []byte) (string, error)           { return string(src), nil }

func writeRun(t *testing.T, s *Store[string], items []reorder.Item[string]) reorder.Run[string] {
	t.Helper()
	w, err := s.Create("keyspace:1/table:7")
	require.NoError(t, err)
	for _, it := range items {
		_, err := w.Stage(it)
		require.NoError(t, err)
		require.NoError(t, w.Commit())
	}
	r, err := w.Finish()
	require.NoError(t, err)
	return r
}

func readAll(r reorder.Run[string]) ([]reorder.Item[string], error) {
	rd, err := r.Open()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var out []reorder.Item[string]
	for {
		it, ok, err := rd.Next()
		if err != nil {
			return out, err
		}
		if !ok {
			return out, nil
		}
		out = append(out, it)
	}
}

func TestRS7_RoundTripAndRemove(t *testing.T) {
	d, err := OpenDir(filepath.Join(t.TempDir(), "spill"))
	require.NoError(t, err)
	s := NewStore[string](d, strCodec{})
	items := []reorder.Item[string]{{CommitTs: 5, Ordinal: 0, Size: 3, Value: "abc"}, {CommitTs: 5, Ordinal: 2, Size: 0, Value: ""},
		{CommitTs: 1 << 62, Ordinal: 1 << 40, Size: 1 << 33, Value: string(make([]byte, 300_000))}}
	r := writeRun(t, s, items)
	require.Contains(t, filepath.Base(r.Name()), "keyspace_1_table_7")
	require.Equal(t, int64(1), d.Files())
	got, err := readAll(r)
	require.NoError(t, err)
	require.Equal(t, items, got)
	// A staged row that is not committed is not written.
	w, err := s.Create("p")
	require.NoError(t, err)
	_, err = w.Stage(reorder.Item[string]{CommitTs: 1, Value: "dropped"})
	require.NoError(t, err)
	n, err := w.Stage(reorder.Item[string]{CommitTs: 2, Value: "kept"})
	require.NoError(t, err)
	require.Equal(t, int64(8+3+4), n, "record header + uvarints + value")
	require.NoError(t, w.Commit())
	r2, err := w.Finish()
	require.NoError(t, err)
	got, err = readAll(r2)
	require.NoError(t, err)
	require.Equal(t, []reorder.Item[string]{{CommitTs: 2, Value: "kept"}}, got)
	// RS4: removal deletes the file.
	require.NoError(t, r.Remove())
	require.NoError(t, r2.Remove())
	_, err = os.Stat(r.Name())
	require.True(t, errors.Is(err, os.ErrNotExist))
	require.Equal(t, int64(0), d.Files())
	// Abort removes a run being written.
	w, err = s.Create("p")
	require.NoError(t, err)
	require.NoError(t, w.Abort())
	ents, _ := os.ReadDir(d.Path())
	require.Empty(t, ents)
}

// TestRS4_StartupRemovesRunFiles: runs left by a previous process hold
// nothing acknowledged and are removed when the directory is opened;
// other files are left alone.
func TestRS4_StartupRemovesRunFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spill")
	d, err := OpenDir(path)
	require.NoError(t, err)
	s := NewStore[string](d, strCodec{})
	r := writeRun(t, s, []reorder.Item[string]{{CommitTs: 1, Value: "x"}})
	require.NoError(t, os.WriteFile(filepath.Join(path, "README"), []byte("keep"), 0o644))
	_, err = OpenDir(path)
	require.NoError(t, err)
	_, err = os.Stat(r.Name())
	require.True(t, errors.Is(err, os.ErrNotExist), "stale run removed at startup")
	_, err = os.Stat(filepath.Join(path, "README"))
	require.NoError(t, err)
}

// TestRS6_DamagedFileNamesFileAndOffset: a flipped byte, a cut file and a
// bad header are errors naming the file and the record's offset.
func TestRS6_DamagedFileNamesFileAndOffset(t *testing.T) {
	d, err := OpenDir(t.TempDir())
	require.NoError(t, err)
	s := NewStore[string](d, strCodec{})
	items := []reorder.Item[string]{{CommitTs: 1, Value: "first"}, {CommitTs: 2, Ordinal: 1, Value: "second"}, {CommitTs: 3, Ordinal: 2, Value: "third"}}
	second := int64(len(magic) + recHeader + 3 + len("first")) // offset of the second record
	for _, tc := range []struct {
		name   string
		damage func(b []byte) []byte
		at     int64
		why    string
	}{
		{"flipped value byte", func(b []byte) []byte { b[second+recHeader+4] ^= 0x40; return b }, second, "checksum mismatch"},
		{"flipped length", func(b []byte) []byte { b[second+3] = 0xff; return b }, second, "record length"},
		{"cut in a payload", func(b []byte) []byte { return b[:second+recHeader+2] }, second, "truncated record (2 of"},
		{"cut in a header", func(b []byte) []byte { return b[:second+3] }, second, "truncated record header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := writeRun(t, s, items)
			b, err := os.ReadFile(r.Name())
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(r.Name(), tc.damage(b), 0o644))
			got, err := readAll(r)
			var de *DamagedError
			require.ErrorAs(t, err, &de)
			require.Equal(t, r.Name(), de.File)
			require.Equal(t, tc.at, de.Offset)
			require.Contains(t, err.Error(), fmt.Sprintf("spill: %s: damaged record at offset %d: %s", r.Name(), tc.at, tc.why))
			require.Equal(t, items[:1], got, "rows before the damage read back, nothing after")
		})
	}
	r := writeRun(t, s, items)
	require.NoError(t, os.WriteFile(r.Name(), []byte("NOTSPILL"), 0o644))
	_, err = r.Open()
	require.ErrorContains(t, err, "damaged record at offset 0: bad file header")
}

// failAfter fails every write once limit bytes were written.
type failAfter struct {
	w     io.Writer
	limit int
	err   error
}

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.limit {
		n, _ := f.w.Write(p[:f.limit])
		f.limit = 0
		return n, f.err
	}
	f.limit -= len(p)
	return f.w.Write(p)
}

// TestRS6_DiskFullThroughBuffer: a disk-full error while a buffer spills
// is fatal and reads "spill: no space left on <dir>"; the rows stay in
// memory (nothing acknowledged is lost), the partial file is removed, and
// a fresh directory (the rerun after freeing space) spills and drains.
func TestRS6_DiskFullThroughBuffer(t *testing.T) {
	path := t.TempDir()
	d, err := OpenDir(path, WithWriter(func(f *os.File) io.Writer {
		return &failAfter{w: f, limit: 100, err: &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}}
	}))
	require.NoError(t, err)
	mem, err := memquota.New("memory-quota", 4096)
	require.NoError(t, err)
	b, err := reorder.New[string](reorder.Config{Partition: "table:7", Memory: mem}, reorder.WithRuns[string](NewStore[string](d, strCodec{})))
	require.NoError(t, err)
	var addErr error
	for i := 0; i < 100_000 && addErr == nil; i++ {
		addErr = b.Add(10, 100, string(make([]byte, 100)))
	}
	require.ErrorContains(t, addErr, "spill: no space left on "+path)
	require.True(t, errors.Is(addErr, syscall.ENOSPC))
	var se *reorder.SpillError
	require.ErrorAs(t, addErr, &se)
	require.Equal(t, "table:7", se.Partition)
	rows, _ := b.Unsealed()
	require.Greater(t, rows, 0, "the rows that could not be written are still held")
	require.Equal(t, int64(0), d.Files(), "the partial run was removed")
	require.NoError(t, b.Discard())
	require.Zero(t, mem.Used())

	// The rerun: space freed, the same directory opened again.
	d, err = OpenDir(path)
	require.NoError(t, err)
	b, err = reorder.New[string](reorder.Config{Partition: "table:7", Memory: mem}, reorder.WithRuns[string](NewStore[string](d, strCodec{})))
	require.NoError(t, err)
	const n = 2000
	for i := 0; i < n; i++ {
		require.NoError(t, b.Add(uint64(10+i%3), 100, fmt.Sprintf("%04d", i)))
	}
	require.Greater(t, d.Files(), int64(1))
	require.NoError(t, b.SealCheckpoint(20))
	got, err := b.Take(nil, -1)
	require.NoError(t, err)
	require.Len(t, got, n)
	for i := 1; i < n; i++ {
		require.True(t, got[i-1].CommitTs < got[i].CommitTs || (got[i-1].CommitTs == got[i].CommitTs && got[i-1].Ordinal < got[i].Ordinal))
		require.Equal(t, fmt.Sprintf("%04d", got[i].Ordinal), got[i].Value)
	}
	require.NoError(t, b.Acknowledge())
	require.Equal(t, int64(0), d.Files(), "acknowledged runs are removed")
	ents, _ := os.ReadDir(path)
	require.Empty(t, ents)
}

// TestRS6_DamagedRunStopsTheDrain: a run damaged on disk fails the drain
// with the file and offset, through the buffer.
func TestRS6_DamagedRunStopsTheDrain(t *testing.T) {
	d, err := OpenDir(t.TempDir())
	require.NoError(t, err)
	mem, _ := memquota.New("memory-quota", 2000)
	b, err := reorder.New[string](reorder.Config{Partition: "table:7", Memory: mem}, reorder.WithRuns[string](NewStore[string](d, strCodec{})))
	require.NoError(t, err)
	for i := 0; i < 100; i++ {
		require.NoError(t, b.Add(10, 100, "row"))
	}
	ents, err := os.ReadDir(d.Path())
	require.NoError(t, err)
	require.NotEmpty(t, ents)
	name := filepath.Join(d.Path(), ents[0].Name())
	raw, err := os.ReadFile(name)
	require.NoError(t, err)
	off := len(magic) + 2*(recHeader+int(binary.LittleEndian.Uint32(raw[len(magic):])))
	raw[off+recHeader] ^= 1
	require.NoError(t, os.WriteFile(name, raw, 0o644))
	require.NoError(t, b.SealCheckpoint(10))
	got, err := b.Take(nil, -1)
	require.ErrorContains(t, err, fmt.Sprintf("spill: %s: damaged record at offset %d: checksum mismatch", name, off))
	require.Len(t, got, 2, "the rows before the damage")
}
