package emulator

import (
	"log"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/searchfabric/sfemu/emulator/contract"
)

// Error is the typed rejection every emulator call returns (E90). It is the
// contract package's type, re-exported so callers need one import.
type Error = contract.Error

// Reason is a stable rejection code.
type Reason = contract.Reason

// ReasonOf returns the Reason of a contract error in err's chain, or "".
func ReasonOf(err error) Reason { return contract.ReasonOf(err) }

// Clock is the emulator's only time source: bounded read waits (E71) and
// watermark lag metrics use it, so tests can drive time.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// RealClock is the wall clock.
var RealClock Clock = realClock{}

// Options configure an Emulator. Zero values take the defaults.
type Options struct {
	// MaxReadWait bounds how long a read with min_ts waits for safe_ts
	// (E71). Default 5s.
	MaxReadWait time.Duration
	// TombstoneRetention is how far safe_ts must pass a tombstone before it
	// is collected (E39). Default 10 minutes. Negative disables collection.
	TombstoneRetention time.Duration
	// Clock is the time source. Default RealClock.
	Clock Clock
	// Registerer receives the emulator's Prometheus collectors. Default: a
	// private registry, returned by Emulator.Registry.
	Registerer prometheus.Registerer
	// VectorHNSWThreshold is passed to the vector modality (live vectors
	// at which HNSW is built). 0 takes the vector package's default;
	// negative disables HNSW.
	VectorHNSWThreshold int
	// VectorGraphEager builds a vector index's HNSW graph in the background
	// as soon as it reaches the threshold; by default the build starts at
	// the collection's first vector search (VEC-G3).
	VectorGraphEager bool
	// VectorMemoryBudget bounds the memory of all vector indexes together
	// (every collection, both generations during a rebuild), in bytes as
	// vector.Index.Bytes accounts them (VEC-G4). The index whose write
	// passes it moves its vectors to a file under VectorSpillDir and
	// drops its HNSW graph; it answers exact scans over the file until
	// the collection's next rebuild or Open (VEC-Q1). Default 1 GiB;
	// negative = no budget.
	VectorMemoryBudget int64
	// VectorSpillDir is where spilled vector indexes keep their vectors
	// (unlinked files). Default: vector-spill under the emulator's
	// directory, or the system temporary directory in memory mode.
	VectorSpillDir string
	// TextScratchDir is the parent directory of the text modality's
	// scratch indexes (text.OpenScratch: segment files scorch merges in
	// the background; never durable, rebuilt from the documents on Open,
	// E61). Default text.DefaultScratchParent(): /dev/shm when writable,
	// else the system temporary directory.
	TextScratchDir string
	// TextEngine selects the text modality's index: text.EngineMem (the
	// default, "": an in-memory inverted index, TXT-M1) or text.EngineBleve
	// (bleve/scorch scratch indexes, TXT-P5), kept for comparison.
	TextEngine string
	// TextMemoryBudget bounds each collection's in-memory text index, in
	// bytes as text.Mem accounts them (TXT-M6). When an index passes it,
	// that collection's text index is rebuilt into the disk-backed bleve
	// engine under TextScratchDir and stays there until the collection's
	// next rebuild or Open (TXT-M7). Default 256 MiB; negative = no budget.
	TextMemoryBudget int64
	// Logf receives the emulator's rare operational messages (a text
	// index spilling to disk). Default log.Printf.
	Logf func(format string, args ...any)
}

func (o Options) withDefaults() Options {
	if o.MaxReadWait <= 0 {
		o.MaxReadWait = 5 * time.Second
	}
	if o.TombstoneRetention == 0 {
		o.TombstoneRetention = 10 * time.Minute
	}
	if o.TextMemoryBudget == 0 {
		o.TextMemoryBudget = defaultTextMemoryBudget
	}
	if o.VectorMemoryBudget == 0 {
		o.VectorMemoryBudget = defaultVectorMemoryBudget
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	if o.Clock == nil {
		o.Clock = RealClock
	}
	return o
}

// tsoPhysicalShift is the number of logical bits in a TiDB TSO.
const tsoPhysicalShift = 18

// durationToTSO converts a duration into TSO units (physical ms << 18).
func durationToTSO(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64(d.Milliseconds()) << tsoPhysicalShift
}

// tsoTime returns the wall time a TSO's physical part encodes.
func tsoTime(ts uint64) time.Time {
	return time.UnixMilli(int64(ts >> tsoPhysicalShift))
}
