package datadir

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// rule: SR6 — a data dir is bound to the first upstream that used it;
// another upstream, and state without the marker, are refused; a fresh
// start removes exactly the state entries.
func TestBindAndRemoveState(t *testing.T) {
	dir := t.TempDir()
	if err := Bind(dir, Owner{Mode: "real", ClusterID: 7}); err != nil {
		t.Fatal(err)
	}
	if err := Bind(dir, Owner{Mode: "real", ClusterID: 7}); err != nil {
		t.Fatalf("same upstream refused: %v", err)
	}
	err := Bind(dir, Owner{Mode: "real", ClusterID: 8})
	if err == nil || !strings.Contains(err.Error(), "another upstream") || !strings.Contains(err.Error(), "cluster id 8") {
		t.Fatalf("another cluster: want a refusal naming it, got %v", err)
	}

	for _, sub := range []string{Emulator, Upstream, "client.log"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := RemoveState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{Emulator, Upstream, Marker}; !reflect.DeepEqual(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "client.log")); err != nil {
		t.Fatalf("a non-state entry was removed: %v", err)
	}

	// State without the marker belongs to an unknown upstream.
	if err := os.MkdirAll(filepath.Join(dir, SchemaStore), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Bind(dir, Owner{Mode: "embedded"}); err == nil || !strings.Contains(err.Error(), "unknown upstream") {
		t.Fatalf("state without %s: want a refusal, got %v", Marker, err)
	}
	// ... and, embedded, it came from an upstream that lived in memory.
	if err := CheckEmbedded(dir); err == nil || !strings.Contains(err.Error(), "--fresh") {
		t.Fatalf("state without a persisted upstream: want a refusal naming --fresh, got %v", err)
	}
}

// rule: SR6 — one process per data dir: a second lock fails at once,
// naming the lock file; unlocking frees it.
func TestLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	unlock, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(dir); err == nil || !strings.Contains(err.Error(), LockFile) {
		t.Fatalf("second lock: want a refusal naming %s, got %v", LockFile, err)
	}
	unlock()
	unlock2, err := Lock(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}

// The service GC safe point id is derived from the absolute data dir:
// stable for a dir, different across dirs.
func TestGCConfigPerDir(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	if GCConfig(a).ServiceID != GCConfig(a).ServiceID || GCConfig(a).ServiceID == GCConfig(b).ServiceID {
		t.Fatalf("service ids: %q %q %q", GCConfig(a).ServiceID, GCConfig(a).ServiceID, GCConfig(b).ServiceID)
	}
	if !strings.HasPrefix(GCConfig(a).ServiceID, "sfemu-") {
		t.Fatalf("service id %q", GCConfig(a).ServiceID)
	}
}
