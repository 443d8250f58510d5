package adapter

// Startup phase 3, the schema store: the multi-version schema history,
// following the DDL job span through its own KV source.

import (
	"context"
	"time"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/schemastore"
)

// storeConfig configures startSchemaStore.
type storeConfig struct {
	// Dir is the store's directory (Config.DataDir/schemastore).
	Dir string
	// Poll is the in-process source's pump interval.
	Poll time.Duration
	// StartTs is the resume point: the store's history starts there.
	StartTs uint64
}

// storeFeed is the schema store and the source that feeds it, delivered
// on its own goroutine: the runtime's rows wait for the store to reach
// commit_ts-1 (specs/minicdc.md M22), and a source delivers all of its
// spans from one goroutine, so sharing the tables' source would make that
// wait wait for itself.
type storeFeed struct {
	store  *schemastore.Store
	src    kvevent.Source
	cancel context.CancelFunc
	done   chan error
}

// startSchemaStore opens the store at cfg.StartTs over a new source of up
// and starts delivering that source.
func startSchemaStore(up *Upstream, cfg storeConfig) (*storeFeed, error) {
	src, err := up.NewSource(cfg.Poll)
	if err != nil {
		return nil, err
	}
	store, err := schemastore.New(schemastore.Config{Dir: cfg.Dir, Snapshot: up.Snapshot(), Source: src, InitialTs: cfg.StartTs})
	if err != nil {
		_ = src.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &storeFeed{store: store, src: src, cancel: cancel, done: make(chan error, 1)}
	go func() { f.done <- src.Run(ctx) }()
	return f, nil
}

// stop ends the source's delivery and closes it (the store itself is
// closed by the runtime that owns it).
func (f *storeFeed) stop() error {
	f.cancel()
	err := <-f.done
	if cerr := f.src.Close(); err == nil {
		err = cerr
	}
	return err
}
