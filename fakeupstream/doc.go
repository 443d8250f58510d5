// Package fakeupstream is a deterministic, in-process TiKV-style cluster: TSO,
// Percolator MVCC, regions and stores, SQL through the TiDB parser, DDL jobs,
// and a CDC feed that writes exactly the bytes TiDB writes.
//
// Layout:
//
//   - tso: PD-style timestamps from a virtual (test-stepped) or wall clock.
//   - mvcc: the Percolator store over raw keys (prewrite, commit, rollback,
//     1PC, async commit, lock errors, txn status, resolve lock, GC).
//   - topology: regions with epochs and comparable boundaries on stores.
//   - cdcfeed: the EventFeed service (per-store streams of cdcpb events,
//     incremental scan, live rows, resolved ts, region errors, seeded
//     delivery scheduler, fault hooks).
//   - this package: Cluster (wires the above under one mutex; snapshot
//     reads, resolver, topology and fault operations), Txn (the typed
//     transaction API tests and the SQL layer write through) and Source
//     (the in-process kvevent.Source over upstream/logpuller).
//   - sqlfront: SQL and DDL jobs on top of Txn (its own spec).
//   - kvlog: the durable form of a cluster with Config.Dir (a checksummed
//     append-only log of the MVCC journal and the TSO window, group
//     commit); New on the same Dir restores the committed state.
//
// The normative rules are in specs/fakeupstream-cluster.md.
package fakeupstream
