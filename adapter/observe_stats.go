package adapter

import (
	"github.com/searchfabric/sfemu/upstream/logpuller"
	"github.com/searchfabric/sfemu/upstream/schemastore"
)

// Read-only figures for the binary's metrics (specs/sfemu-run.md SR12).

// RegionStats lists the live region subscriptions of every running gRPC
// source this upstream opened (the tables' and the schema store's), as
// each last published them (logpuller T16); nil in process.
func (u *Upstream) RegionStats() []logpuller.RegionStat {
	u.sources.mu.Lock()
	srcs := append([]*logpuller.GRPCSource(nil), u.sources.srcs...)
	u.sources.mu.Unlock()
	var out []logpuller.RegionStat
	for _, s := range srcs {
		out = append(out, s.RegionStats()...)
	}
	return out
}

// SchemaStoreStats is the adapter's schema store's figures (SS61).
func (a *Adapter) SchemaStoreStats() schemastore.Stats {
	if a.feed == nil || a.feed.store == nil {
		return schemastore.Stats{}
	}
	return a.feed.store.Stats()
}
