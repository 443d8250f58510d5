package datadir

import (
	"github.com/searchfabric/sfemu/snapshot"

	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"

	"github.com/searchfabric/sfemu/fakeupstream/kvlog"
	"github.com/searchfabric/sfemu/upstream/pd"
)

// The data dir's entries.
const (
	// Emulator holds the emulator's collections and stored progress.
	Emulator = "emulator"
	// SchemaStore holds the adapter's schema store.
	SchemaStore = "schemastore"
	// Upstream is where the embedded mode persists its upstream.
	Upstream = "upstream"
	// Marker binds the dir to the upstream its state came from.
	Marker = "upstream.json"
)

// StateDirs are the entries that hold a run's state.
var StateDirs = []string{Emulator, SchemaStore, Upstream, Marker, snapshot.FileName}

// RemoveState removes the dir's state entries (a fresh start) and returns
// the ones it removed.
func RemoveState(dir string) ([]string, error) {
	var removed []string
	for _, sub := range StateDirs {
		p := filepath.Join(dir, sub)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return removed, err
		}
		removed = append(removed, sub)
	}
	return removed, nil
}

// CheckEmbedded refuses a data dir whose collections came from an
// embedded upstream that was not persisted (sfemu before the upstream was
// durable kept it in memory): that upstream is gone, so the stored
// progress points into a history nothing can replay.
func CheckEmbedded(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, Upstream, kvlog.FileName)); err == nil {
		return nil
	}
	for _, sub := range []string{Emulator, SchemaStore} {
		if _, err := os.Stat(filepath.Join(dir, sub)); err == nil {
			return fmt.Errorf("data dir %s holds %s/ but no %s/: its collections came from an in-memory embedded upstream (an earlier sfemu) that no longer exists, so they cannot resume: run with --fresh to remove that state and start over",
				dir, sub, Upstream)
		}
	}
	return nil
}

// Owner is the upstream a data dir's state belongs to.
type Owner struct {
	Mode      string `json:"mode"`
	ClusterID uint64 `json:"cluster_id,omitempty"`
}

// Bind refuses a data dir whose state belongs to another upstream (the
// emulator's progress and the schema store would not match it), and
// records the owner of a fresh one.
func Bind(dir string, owner Owner) error {
	p := filepath.Join(dir, Marker)
	raw, err := os.ReadFile(p)
	switch {
	case err == nil:
		var got Owner
		if err := json.Unmarshal(raw, &got); err != nil {
			return fmt.Errorf("data dir %s: %s: %w", dir, Marker, err)
		}
		if got != owner {
			return fmt.Errorf("data dir %s holds the state of another upstream (%s, cluster id %d), not this one (%s, cluster id %d): use another --data-dir",
				dir, got.Mode, got.ClusterID, owner.Mode, owner.ClusterID)
		}
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("data dir %s: %w", dir, err)
	}
	for _, sub := range []string{Emulator, SchemaStore} {
		if _, err := os.Stat(filepath.Join(dir, sub)); err == nil {
			return fmt.Errorf("data dir %s holds state of an unknown upstream (%s without %s): use another --data-dir (or, in the embedded mode, --fresh to remove that state)", dir, sub, Marker)
		}
	}
	b, _ := json.Marshal(owner)
	return os.WriteFile(p, b, 0o644)
}

// GCConfig names the adapter's service GC safe point after its data dir:
// the dir holds the progress the hold protects, so two sfemu instances
// with different data dirs hold separately.
func GCConfig(dir string) pd.ServiceSafePointConfig {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(abs))
	return pd.ServiceSafePointConfig{ServiceID: fmt.Sprintf("sfemu-%016x", h.Sum64())}
}
