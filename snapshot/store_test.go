package snapshot

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sampleState() *State {
	return &State{Version: StateVersion, Ts: 4242, Epoch: 3, Tables: []Table{{
		Name: "shop.items", Collection: "shop.items", PhysicalID: 106,
		Ranges: []Range{
			{Start: []byte("t\x80a"), End: []byte("t\x80m"), Next: []byte("t\x80c"), Rows: 17},
			{Start: []byte("t\x80m"), End: []byte("t\x80z"), Done: true, Rows: 250},
		},
	}}}
}

// SN13: the state round-trips, and a byte of the state changed at rest
// is an error naming the file even when the result still decodes as a
// valid state (a row count 250 -> 350).
func TestSN13_StateFileChecksum(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	want := sampleState()
	if err := Save(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	wb, _ := json.Marshal(want)
	gb, _ := json.Marshal(got)
	if !bytes.Equal(wb, gb) {
		t.Fatalf("round trip:\n got %s\nwant %s", gb, wb)
	}

	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damaged := bytes.Replace(b, []byte(`"rows":250`), []byte(`"rows":350`), 1)
	if bytes.Equal(damaged, b) {
		t.Fatalf("the sample does not hold the row count: %s", b)
	}
	// Still a valid state without the checksum: only SN13 can catch it.
	var env envelope
	if err := json.Unmarshal(damaged, &env); err != nil {
		t.Fatal(err)
	}
	var st State
	if err := json.Unmarshal(env.State, &st); err != nil || st.Check() != nil {
		t.Fatalf("the damaged state should decode and pass Check: %v %v", err, st.Check())
	}
	if err := os.WriteFile(path, damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("damaged state file: err = %v, want one naming %s as damaged", err, path)
	}
}

// SN13: a state file written before the checksum (the bare state) is
// still read, so an upgrade resumes a snapshot in progress.
func TestSN13_StateFileWithoutChecksumIsRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	bare, err := json.Marshal(sampleState())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bare, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Ts != 4242 || got.Tables[0].Ranges[1].Rows != 250 {
		t.Fatalf("bare state read as %+v", got)
	}
}
