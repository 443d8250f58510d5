package adapter

// The marks of joining tables' snapshots not finished yet (LT6), in
// DataDir/added-snapshots.json: written before the collection is
// created, removed once the stream took over. A start finding one drops
// that collection: it holds part of the table's rows and no progress,
// and /admin/tables additions last for one run (TF8).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/searchfabric/sfemu/normalize"
)

const addMarksFile = "added-snapshots.json"

type addMark struct {
	Table      string `json:"table"`
	Collection string `json:"collection"`
	Ts         uint64 `json:"ts"`
}

var addMarksMu sync.Mutex // marks of one data dir are changed by one adapter at a time

func loadAddMarks(path string) ([]addMark, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("adapter: reading %s: %w", path, err)
	}
	var marks []addMark
	if err := json.Unmarshal(b, &marks); err != nil {
		return nil, fmt.Errorf("adapter: %s is damaged (%v): remove it and drop the collections of tables added by /admin/tables whose snapshot did not finish", path, err)
	}
	return marks, nil
}

func saveAddMarks(path string, marks []addMark) error {
	if len(marks) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("adapter: %w", err)
		}
		return nil
	}
	b, _ := json.Marshal(marks) // plain structs: cannot fail
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("adapter: writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("adapter: %w", err)
	}
	return nil
}

// markAdd records m (no data dir: nothing to recover, nothing kept).
func markAdd(dataDir string, m addMark) error {
	return updateAddMarks(dataDir, func(marks []addMark) []addMark { return append(marks, m) })
}

func unmarkAdd(dataDir, coll string) error {
	return updateAddMarks(dataDir, func(marks []addMark) []addMark {
		kept := marks[:0]
		for _, m := range marks {
			if m.Collection != coll {
				kept = append(kept, m)
			}
		}
		return kept
	})
}

// updateAddMarks rewrites the marks file with change applied to its
// marks, under addMarksMu (no data dir: nothing to do).
func updateAddMarks(dataDir string, change func([]addMark) []addMark) error {
	if dataDir == "" {
		return nil
	}
	addMarksMu.Lock()
	defer addMarksMu.Unlock()
	path := filepath.Join(dataDir, addMarksFile)
	marks, err := loadAddMarks(path)
	if err != nil {
		return err
	}
	return saveAddMarks(path, change(marks))
}

// dropUnfinishedAdds drops the collections of joining tables whose
// snapshot a stop interrupted (LT6), naming each in log.
func dropUnfinishedAdds(ctx context.Context, sink normalize.Sink, cfg Config, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	if cfg.DataDir == "" {
		return nil
	}
	path := filepath.Join(cfg.DataDir, addMarksFile)
	addMarksMu.Lock()
	marks, err := loadAddMarks(path)
	addMarksMu.Unlock()
	if err != nil || len(marks) == 0 {
		return err
	}
	clientID := cfg.ClientID
	if clientID == "" {
		clientID = "sfemu"
	}
	for _, m := range marks {
		if err := dropCollections(ctx, sink, []string{m.Collection}, m.Ts, clientID); err != nil {
			return err
		}
		fmt.Fprintf(log, "sfemu: the snapshot of table %s (added at ts %d) did not finish before the stop: collection %q dropped; add the table again (POST /admin/tables) to mirror it\n", m.Table, m.Ts, m.Collection)
		if err := unmarkAdd(cfg.DataDir, m.Collection); err != nil {
			return err
		}
	}
	return nil
}
