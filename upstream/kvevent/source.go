package kvevent

import "context"

// Consumer receives the changes of one subscribed span, synchronously, on the
// source's delivery goroutine for that span. It has no error return (the
// TiCDC consume contract): a consumer that fails records the error with its
// owner and stops the runtime; the source stops when its context ends.
type Consumer interface {
	// ConsumeKV delivers committed entries of the span in the order the
	// source received them (not necessarily commit_ts order across regions).
	// The slice and the bytes it points to are borrowed for the call.
	ConsumeKV(entries []RawKVEntry)
	// AdvanceResolvedTs reports that every change of the span with
	// commit_ts <= ts has been delivered. It is called only with increases.
	AdvanceResolvedTs(ts uint64)
}

// Source is the seam between the runtime and TiKV: the EventFeed log puller
// and the in-process fake both implement it.
type Source interface {
	// Subscribe starts delivering the changes of span (comparable form) with
	// commit_ts > startTs to c. Deliveries happen while Run runs.
	Subscribe(ctx context.Context, subID uint64, span Span, startTs uint64, c Consumer) error
	// Run drives delivery until ctx is done (returns nil) or a fatal error
	// (returned).
	Run(ctx context.Context) error
	// Close releases resources; called after Run returned.
	Close() error
}

// KV is one key and value read from a snapshot.
type KV struct {
	Key   []byte
	Value []byte
}

// SnapshotReader reads committed data at a ts (the schema store's initial
// meta snapshot, consistency checks). Keys are raw TiDB keys.
type SnapshotReader interface {
	// Get returns the value of key at ts, or nil when absent.
	Get(ctx context.Context, key []byte, ts uint64) ([]byte, error)
	// Scan returns up to limit pairs in [start, end) at ts, in key order.
	Scan(ctx context.Context, start, end []byte, ts uint64, limit int) ([]KV, error)
	// GCSafePoint returns the cluster's GC safe point; reads below it fail.
	GCSafePoint(ctx context.Context) (uint64, error)
}

// Clock hands out timestamps (PD's TSO or the fake's).
type Clock interface {
	CurrentTs(ctx context.Context) (uint64, error)
}
