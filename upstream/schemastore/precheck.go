package schemastore

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/searchfabric/sfemu/emulator/storage"
)

// precheckFile checks a store file before bbolt maps it (SS58), with the
// emulator store's checks (E63: meta pages, the size against the
// high-water mark, the page tree read from the file): one implementation
// of bbolt's on-disk format in the project. Damage is a *CorruptError
// naming the file; a missing or empty file is a new store.
func precheckFile(path string) error {
	err := storage.CheckFile(path)
	if err == nil {
		return nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if !errors.Is(err, storage.ErrDamaged) {
		return fmt.Errorf("schemastore: check %s: %w", path, err)
	}
	// The check's text starts "storage: open <path>: <file> ..."; keep
	// what it says is wrong.
	reason := err.Error()
	if i := strings.Index(reason, path+": "); i >= 0 {
		reason = reason[i+len(path)+2:]
	}
	return &CorruptError{Path: path, Reason: reason}
}
