// Package fakeupstream is a deterministic, in-process TiKV-style cluster: TSO,
// Percolator MVCC, regions and stores, SQL through the TiDB parser, DDL jobs,
// and a CDC feed that writes exactly the bytes TiDB writes.
package fakeupstream
