package adapter

import (
	"io"
	"time"

	"github.com/searchfabric/sfemu/emulator"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/tablefilter"
	"github.com/searchfabric/sfemu/upstream/pd"
	"github.com/searchfabric/sfemu/verify"
)

// TableRef names an upstream table and its collection. It is the
// consistency checker's type, so a configured table set is checked as is.
type TableRef = verify.TableRef

// Config configures Start.
type Config struct {
	// DataDir holds the schema store (DataDir/schemastore).
	DataDir string
	// Tables are the mirrored tables; every physical partition of a
	// partitioned table is one table path.
	Tables []TableRef
	// ClientID identifies the adapter to the emulator. Default "sfemu".
	ClientID string
	// DDLPollLimit is the trigger-DDL batch size. Default 64.
	DDLPollLimit int
	// Runtime tunes the Mini-CDC runtime.
	Runtime minicdc.Options
	// Bridge tunes the normalize bridge; ClientID, StartTs and Tables are
	// filled in by Start.
	Bridge normalize.Config
	// SourcePoll is the in-process sources' pump interval. Default 5 ms.
	SourcePoll time.Duration
	// StartTs is where a partition without stored progress starts (0 =
	// the upstream's current ts). Changes committed after it are
	// delivered; the tables must exist at it.
	StartTs uint64
	// Tap, when set, sees every callback before the bridge does (tests
	// use it to observe order and decoding); an error it returns is the
	// callback's error.
	Tap minicdc.Callback
	// WrapSink, when set, wraps the emulator as the bridge's sink (tests
	// use it to observe batches and progress).
	WrapSink func(normalize.Sink) normalize.Sink
	// GC tunes the service GC safe point the adapter holds at its
	// checkpoint when it reads through PD (ModeWire, ModeReal).
	// ServiceID defaults to "sfemu-" + ClientID.
	GC pd.ServiceSafePointConfig
	// Filter, when set, is the --tables filter the table set follows while
	// running: a table created or renamed into it is mirrored from then
	// on, one renamed out of it is no longer (specs/tableset.md LT1,
	// LT3). Nil: the set is Tables, changed only by DDLs of those tables.
	Filter *tablefilter.Filter
	// Log receives one line per table-set change (nil discards).
	Log io.Writer
	// Memory is the memory and spill quota (RS1-RS5); a nil Quota gets
	// DefaultMemoryQuota. Spill files go to DataDir/spill.
	Memory Memory
	// Snapshot configures the initial snapshot (SN1-SN12); the zero value
	// never snapshots.
	Snapshot SnapshotConfig
	// Phase, when set, is told of long phases (the initial snapshot) for
	// the binary's status; nil: nobody is told (phase.go).
	Phase PhaseHook
}

// withDefaults fills the defaults documented on the fields.
func (c Config) withDefaults() Config {
	if c.ClientID == "" {
		c.ClientID = "sfemu"
	}
	if c.DDLPollLimit <= 0 {
		c.DDLPollLimit = 64
	}
	if c.GC.ServiceID == "" {
		c.GC.ServiceID = "sfemu-" + c.ClientID
	}
	return c
}

// sink is the emulator as the bridge sees it (WrapSink applied).
func (c Config) sink(emu *emulator.Emulator) normalize.Sink {
	var s normalize.Sink = emu
	if c.WrapSink != nil {
		s = c.WrapSink(s)
	}
	return s
}
