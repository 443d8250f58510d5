package adapter

// Startup phase 4, the runtime: the Mini-CDC runtime over the tables'
// own KV source, decoding with the mounter and the schema store.

import (
	"context"
	"time"

	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/logpuller"
	"github.com/searchfabric/sfemu/upstream/mounter"
	"github.com/searchfabric/sfemu/upstream/schemastore"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// runtimeConfig configures startRuntime.
type runtimeConfig struct {
	// StartTs is the resume point.
	StartTs uint64
	// TableIDs are the physical tables followed.
	TableIDs []int64
	// TableStartTs is each table's own start (its stored progress) where
	// it is above StartTs (M55).
	TableStartTs map[int64]uint64
	// DDLPollLimit is the trigger-DDL batch size.
	DDLPollLimit int
	// Poll is the in-process source's pump interval.
	Poll time.Duration
	// Options tunes the runtime.
	Options minicdc.Options
	// Matcher bounds the tables' log puller matchers by the adapter's
	// memory quota (LP13-LP16).
	Matcher logpuller.MatcherMemory
}

// startRuntime starts the runtime delivering to cb. From here on the
// runtime owns store: a failure to create the tables' source closes it.
func startRuntime(ctx context.Context, up *Upstream, store *schemastore.Store, cfg runtimeConfig, cb minicdc.Callback) (*minicdc.Runtime, error) {
	src, err := up.newSource(cfg.Poll, cfg.Matcher)
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	return minicdc.Start(ctx, minicdc.StartConfig{StartTs: cfg.StartTs, TableIDs: cfg.TableIDs, TableStartTs: cfg.TableStartTs, DDLPollLimit: cfg.DDLPollLimit},
		minicdc.Deps{
			Clock:       up.Clock(),
			SchemaStore: store,
			Source:      src,
			NewDecoder: func(int64) (minicdc.RowDecoder, error) {
				return mounter.New(mounter.Config{RequireOldValue: true}), nil
			},
			TableSpan: func(ks uint32, nextGen bool, id int64) (kvevent.Span, error) {
				return tablecodec.TableRecordSpan(ks, nextGen, id), nil
			},
		}, cb, cfg.Options)
}
