// Package logpuller is the pure core of the TiKV change-data client: for one
// subscribed span (one table's record span) it keeps the state of every
// region subscription, matches PREWRITE/COMMIT rows, applies resolved ts only
// after a region is INITIALIZED, maintains the span frontier (min resolved ts
// over the span's sub-ranges, including ranges between a failure and their
// re-subscription) and suppresses re-delivered rows.
//
// The core (SpanPuller) does no I/O and starts no goroutines. The one
// subscription driver (Driver) owns every span's core: it calls AddRegion
// when it sends a region request, hands every cdcpb.Event and batched
// ResolvedTs of the span to HandleEvent / HandleResolvedTs, and acts on the
// RegionRetry values the core returns (re-locate the sub-span, re-subscribe
// from the returned checkpoint). Rows and span resolved-ts advances go
// synchronously to the span's kvevent.Consumer. Below the driver, a
// transport opens the streams: the gRPC EventFeed client (GRPCSource) or
// fakeupstream's in-process feed (fakeupstream.Source).
//
// The rules follow TiKV's EventFeed contract as TiCDC consumes it; see
// specs/logpuller.md (LP: the core, T: the driver and transport; the core's
// ordering rules are pinned by testdata/core/*.txt) for the numbered rules and
// ../../../shared/reference/ticdc-protocol-facts.md §1-§3 for the facts.
package logpuller
