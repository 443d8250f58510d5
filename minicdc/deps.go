package minicdc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/schemastore"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// SchemaStore is the part of upstream/schemastore the runtime calls. The
// runtime never calls a lookup before the store reported readiness for the
// ts asked (M16, M22), so implementations need not block.
type SchemaStore interface {
	// RegisterKeyspace binds the store's background progress to ctx, which
	// lives until the runtime shuts down. Called once, before any other
	// method.
	RegisterKeyspace(ctx context.Context, keyspaceID uint32) error
	// GetTableDDLEventState reports how far the table's DDL history is known.
	GetTableDDLEventState(tableID int64) (schemastore.DDLEventState, error)
	// RegisterTable starts keeping the table's schema history from startTs.
	RegisterTable(tableID int64, startTs uint64) error
	// GetTableInfo returns the table's schema valid at ts (shared,
	// read-only). Never blocks; a "not ready" error when the store is
	// behind ts.
	GetTableInfo(tableID int64, ts uint64) (*model.TableInfo, error)
	// FetchTableTriggerDDLEvents returns up to limit DDL events with
	// FinishedTs in (start, next], in FinishedTs order, and next: the last
	// event's FinishedTs for a full batch, the store's resolved ts
	// otherwise.
	FetchTableTriggerDDLEvents(start uint64, limit int) ([]schemastore.DDLEvent, uint64, error)
}

// StoreNotifier is implemented by a schema store that announces its
// progress (upstream/schemastore does): ResolvedAdvanced returns a channel
// closed the next time the store's resolved ts grows. The runtime takes it
// before reading the store's state, so an advance in between is not
// missed, and wakes its store waits with it (M22, M34) instead of polling
// on a timer; without it those waits poll with backoff.
type StoreNotifier interface {
	ResolvedAdvanced() <-chan struct{}
}

// RowDecoder turns one raw entry plus the TableInfo valid at commit_ts-1
// into a row change (upstream/mounter's *Mounter). out's row views borrow
// the entry's bytes and the decoder's state until the next Decode call, so
// the runtime keeps one decoder per table path.
type RowDecoder interface {
	Decode(entry *kvevent.RawKVEntry, ti *model.TableInfo, out *DecodedRow) error
}

// TimeSource is the runtime's wall clock for deadlines, poll intervals and
// checkpoint coalescing. Logic never reads time any other way, so tests run
// on virtual time.
type TimeSource interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// RealTime is the TimeSource backed by the process clock.
type RealTime struct{}

func (RealTime) Now() time.Time                         { return time.Now() }
func (RealTime) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Deps are the runtime's collaborators, passed explicitly (M7). From a
// successful or failed Start on, the runtime owns Source and SchemaStore and
// closes them (M9).
type Deps struct {
	// Clock is the TSO (PD's or the fake cluster's).
	Clock kvevent.Clock
	// SchemaStore is the multi-version schema history.
	SchemaStore SchemaStore
	// Source delivers the subscribed spans' raw changes.
	Source kvevent.Source
	// NewDecoder builds one row decoder per table path.
	NewDecoder func(tableID int64) (RowDecoder, error)
	// TableSpan returns a table's comparable record span (keyspace-prefixed
	// in next-gen mode).
	TableSpan func(keyspaceID uint32, nextGen bool, tableID int64) (kvevent.Span, error)
	// Time is the wall clock; nil means RealTime.
	Time TimeSource
}

func (d *Deps) check() error {
	var missing []string
	if d.Clock == nil {
		missing = append(missing, "Clock")
	}
	if d.SchemaStore == nil {
		missing = append(missing, "SchemaStore")
	}
	if d.Source == nil {
		missing = append(missing, "Source")
	}
	if d.NewDecoder == nil {
		missing = append(missing, "NewDecoder")
	}
	if d.TableSpan == nil {
		missing = append(missing, "TableSpan")
	}
	if len(missing) > 0 {
		return fmt.Errorf("Deps missing %v", missing)
	}
	return nil
}

// Options tune the runtime's bounded waits and intervals. The zero value
// means every default (specs/minicdc.md gives them).
type Options struct {
	// StartupReadinessTimeout bounds the wait for the store's resolved ts to
	// reach the start ts, per table (M16). Default 30 s.
	StartupReadinessTimeout time.Duration
	// InitialProgressTimeout bounds the wait for every table's first
	// resolved ts (M18). Default 60 s.
	InitialProgressTimeout time.Duration
	// SchemaReadinessTimeout bounds the wait for the store to reach
	// commit_ts-1 of a row (M22). Default 30 s.
	SchemaReadinessTimeout time.Duration
	// PollBackoffMin and PollBackoffMax bound the readiness polling backoff
	// (doubling). Defaults 1 ms and 50 ms.
	PollBackoffMin, PollBackoffMax time.Duration
	// DDLPollInterval is the longest the DDL poller sleeps without new
	// progress (M34). Default 100 ms.
	DDLPollInterval time.Duration
	// CheckpointInterval is the minimum time between checkpoints (M38).
	// Default 50 ms.
	CheckpointInterval time.Duration
	// MaxFetchRetries is how many consecutive transient DDL fetch errors are
	// tolerated (M35). Default 5.
	MaxFetchRetries int
	// AllowMissingOldValue turns off the old-value invariant (M24). Off by
	// default: an update without pre-image is fatal.
	AllowMissingOldValue bool
	// IsTransient classifies DDL fetch errors worth retrying (M35). Default:
	// a Temporary() bool method returning true, or a context deadline.
	IsTransient func(error) bool
	// IsGCBoundary classifies deterministic GC-boundary fetch errors (M35).
	// Default: a GCBoundary() bool method returning true.
	IsGCBoundary func(error) bool
	// Stages, when set, is told when each stage of the resolved-ts path
	// inside the runtime is passed (the lag breakdown of the adapter's
	// benchmarks). It is called on the delivery and control goroutines,
	// so it must be cheap and safe for concurrent use; nil costs nothing.
	Stages StageObserver

	// manualControl (tests only) keeps the control loop from starting; the
	// test drives it through controlStep.
	manualControl bool
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.StartupReadinessTimeout, 30*time.Second)
	def(&o.InitialProgressTimeout, 60*time.Second)
	def(&o.SchemaReadinessTimeout, 30*time.Second)
	def(&o.PollBackoffMin, time.Millisecond)
	def(&o.PollBackoffMax, 50*time.Millisecond)
	if o.PollBackoffMax < o.PollBackoffMin {
		o.PollBackoffMax = o.PollBackoffMin
	}
	def(&o.DDLPollInterval, 100*time.Millisecond)
	def(&o.CheckpointInterval, 50*time.Millisecond)
	if o.MaxFetchRetries <= 0 {
		o.MaxFetchRetries = 5
	}
	if o.IsTransient == nil {
		o.IsTransient = DefaultIsTransient
	}
	if o.IsGCBoundary == nil {
		o.IsGCBoundary = DefaultIsGCBoundary
	}
	return o
}

// DefaultIsTransient reports errors that say they are temporary
// (Temporary() bool) and context deadlines.
func DefaultIsTransient(err error) bool {
	var t interface{ Temporary() bool }
	if errors.As(err, &t) && t.Temporary() {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// DefaultIsGCBoundary reports errors that say they are GC-boundary errors
// (GCBoundary() bool).
func DefaultIsGCBoundary(err error) bool {
	var g interface{ GCBoundary() bool }
	return errors.As(err, &g) && g.GCBoundary()
}
