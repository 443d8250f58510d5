package snapshot

// The saved state: one JSON file beside the emulator's data, replaced
// atomically (write, fsync, rename, fsync the dir), so a crash leaves
// either the previous or the new state (SN6). The state's bytes carry a
// CRC-32C (SN13): a byte changed at rest that still decodes as a valid
// state (a resume key, a row count) would otherwise make a resume skip or
// re-read ranges silently.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// envelope is the file's layout: the state's JSON exactly as written and
// the checksum of those bytes. A file without a checksum field is the
// layout before SN13 (the bare state), accepted as such.
type envelope struct {
	CRC32C *uint32         `json:"crc32c"`
	State  json.RawMessage `json:"state"`
}

// FileName is the state file's name inside the adapter's data dir.
const FileName = "snapshot.json"

// Load reads the state saved at path; (nil, nil) when there is none.
func Load(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot: reading %s: %w", path, err)
	}
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, fmt.Errorf("snapshot: %s is not a snapshot state: %w", path, err)
	}
	raw := b
	if env.CRC32C != nil {
		if got := crc32.Checksum(env.State, castagnoli); got != *env.CRC32C {
			return nil, fmt.Errorf("snapshot: %s is damaged: checksum %08x of its state, stored %08x (remove it and start with --snapshot=always to read the tables again)", path, got, *env.CRC32C)
		}
		raw = env.State
	}
	var st State
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("snapshot: %s is not a snapshot state: %w", path, err)
	}
	if err := st.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &st, nil
}

// Save replaces the state at path.
func Save(path string, st *State) error {
	b, err := encode(st)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	tmp, err := os.CreateTemp(dir, FileName+".tmp-*")
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("snapshot: writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("snapshot: syncing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("snapshot: syncing %s: %w", dir, err)
	}
	return nil
}

// encode returns the file's bytes for st: the envelope with the state's
// compact JSON and its checksum.
func encode(st *State) ([]byte, error) {
	state, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("snapshot: encoding the state: %w", err)
	}
	sum := crc32.Checksum(state, castagnoli)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `{"crc32c":%d,"state":`, sum)
	buf.Write(state)
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}
