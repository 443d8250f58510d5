package adapter

import (
	"fmt"
	"io"
	"time"

	"github.com/searchfabric/sfemu/snapshot"
)

// SnapshotMode says when the adapter reads its tables' rows at a snapshot
// ts before the stream starts (specs/sfemu-run.md SN1).
type SnapshotMode int

const (
	// SnapshotNever starts the stream without an initial load (the zero
	// value of the library; `sfemu run` defaults to SnapshotAuto).
	SnapshotNever SnapshotMode = iota
	// SnapshotAuto snapshots when the emulator holds nothing of the table
	// set yet (a fresh data dir), and finishes an interrupted snapshot.
	SnapshotAuto
	// SnapshotAlways drops the table set's collections and snapshots
	// again at every start.
	SnapshotAlways
)

func (m SnapshotMode) String() string {
	switch m {
	case SnapshotNever:
		return "never"
	case SnapshotAuto:
		return "auto"
	case SnapshotAlways:
		return "always"
	default:
		return fmt.Sprintf("snapshot-mode(%d)", int(m))
	}
}

// ParseSnapshotMode parses --snapshot: auto, never or always.
func ParseSnapshotMode(s string) (SnapshotMode, error) {
	switch s {
	case "auto", "":
		return SnapshotAuto, nil
	case "never":
		return SnapshotNever, nil
	case "always":
		return SnapshotAlways, nil
	}
	return 0, fmt.Errorf("--snapshot %q: want auto, never or always", s)
}

// SnapshotConfig configures the initial snapshot.
type SnapshotConfig struct {
	Mode SnapshotMode
	// Concurrency is the number of key ranges read in parallel
	// (--snapshot-concurrency, default 4).
	Concurrency int
	// ChunkRows bounds the rows of one scan (default
	// snapshot.DefaultChunkRows).
	ChunkRows int
	// Progress receives the snapshot's counters (the host serves them on
	// /v1/progress); nil: the adapter keeps its own.
	Progress *snapshot.Progress
	// Log receives the snapshot's messages and, every LogEvery (default
	// 5 s), one progress line per table (nil: discarded).
	Log      io.Writer
	LogEvery time.Duration
	// Stop, when set, stops the snapshot when it closes (Ctrl-C): the
	// start fails and the saved state resumes it. The stream is not tied
	// to it.
	Stop <-chan struct{}
	// AfterChunk, when set, is called after each acknowledged chunk;
	// an error stops the snapshot (tests stop it at a chosen point).
	AfterChunk func(t snapshot.Task, rows int) error
}
