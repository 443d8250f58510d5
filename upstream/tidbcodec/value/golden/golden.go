// Package golden locates the project's shared reference data (vectors and
// golden files produced by real TiDB) for tests. The data lives in the
// directory "shared" next to the module root (the directory holding go.mod);
// it is found by walking up from the test's working directory, so nothing is
// hard-coded. Missing files fail the test: conformance must never be skipped.
package golden

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// SharedDir returns <module root>/../shared, failing t when it is missing.
func SharedDir(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatalf("golden: getwd: %v", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			shared := filepath.Join(dir, "..", "shared")
			if st, err := os.Stat(shared); err != nil || !st.IsDir() {
				t.Fatalf("golden: shared data dir %s missing (module root %s): %v", shared, dir, err)
			}
			return shared
		}
		if filepath.Dir(dir) == dir {
			t.Fatalf("golden: no go.mod above %s", wd)
		}
	}
}

// Path returns the path of a file under the shared dir (e.g.
// "golden/tidb-golden.jsonl"), failing t when it does not exist.
func Path(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(SharedDir(t), rel)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("golden: required file %s missing: %v", p, err)
	}
	return p
}

// Record is one JSON Lines object with its line number.
type Record struct {
	Line int
	Raw  json.RawMessage
	Kind string
	Name string
}

// Decode unmarshals the record into v, failing t on error.
func (r Record) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Raw, v); err != nil {
		t.Fatalf("golden: line %d (%s): %v", r.Line, r.Name, err)
	}
}

// Lines reads every record of a JSON Lines file under the shared dir.
func Lines(t testing.TB, rel string) []Record {
	t.Helper()
	f, err := os.Open(Path(t, rel))
	if err != nil {
		t.Fatalf("golden: %v", err)
	}
	defer f.Close()
	var out []Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		line := append([]byte(nil), sc.Bytes()...)
		if len(line) == 0 {
			continue
		}
		var head struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		}
		if err := json.Unmarshal(line, &head); err != nil {
			t.Fatalf("golden: %s line %d: %v", rel, n, err)
		}
		out = append(out, Record{Line: n, Raw: line, Kind: head.Kind, Name: head.Name})
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("golden: reading %s: %v", rel, err)
	}
	return out
}

// OfKind returns the records of one kind, failing t when there are none.
func OfKind(t testing.TB, rel, kind string) []Record {
	t.Helper()
	var out []Record
	for _, r := range Lines(t, rel) {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		t.Fatalf("golden: no records of kind %q in %s", kind, rel)
	}
	return out
}
