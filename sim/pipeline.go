package sim

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/memquota"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/mounter"
	"github.com/searchfabric/sfemu/upstream/schemastore"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// pipeline is one running adapter, assembled as adapter.Start assembles
// it (the table set and the bridge through adapter.ResolveTableSet and
// adapter.OpenBridge; the schema store over its own source; the runtime
// over the tables' source) except that nothing runs on a goroutine of its
// own: the simulator pumps both sources and steps the runtime's control
// loop (minicdc.ManualControl).
type pipeline struct {
	bridge   *normalize.Bridge
	resume   normalize.Resume
	tables   []normalize.Table
	rt       *minicdc.Runtime
	store    *schemastore.Store
	storeSrc *fakeupstream.Source
	tblSrc   *fakeupstream.Source
	manual   *manualSource

	storeErr error // the schema store's source failed: it stops following
	failed   bool  // the tables' source failed (handed to the runtime)
	closed   bool
}

// manualSource is the runtime's view of the tables' source: Subscribe
// goes to the real source; Run only waits, because the simulator pumps
// the source itself, and returns the error of a failed pump (the runtime
// then stops with trigger "source", as over a real transport).
type manualSource struct {
	src  *fakeupstream.Source
	fail chan error
}

func (m *manualSource) Subscribe(ctx context.Context, subID uint64, span kvevent.Span, startTs uint64, c kvevent.Consumer) error {
	return m.src.Subscribe(ctx, subID, span, startTs, c)
}

func (m *manualSource) Run(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-m.fail:
		return err
	}
}

func (m *manualSource) Close() error { return m.src.Close() }

// memoryQuota is small so that the large transactions of the workload
// spill (RS1): a few hundred rows exceed it.
const memoryQuota = 24 << 10

// startPipeline starts an adapter over w's upstream and emulator. The
// runtime's waits yield to the world (vclock), so Start returns after the
// store and the sources have been pumped enough, or with a fatal error.
func (w *world) startPipeline() (*pipeline, error) {
	ctx := context.Background()
	mem, err := memquota.New("memory-quota", memoryQuota)
	if err != nil {
		return nil, err
	}
	cfg := adapter.Config{
		DataDir:  w.adapterDir,
		Tables:   w.refs(),
		WrapSink: w.wrapSink,
		Memory:   adapter.Memory{Quota: mem, Hint: "sim"},
	}
	cfg.Tap = tapCallback{c: w.chk}
	cfg.Bridge.Timer = w.clk
	cfg.Bridge.MaxBatchRows = 16
	w.chk.opening()
	w.checkStored()
	tables, err := adapter.ResolveTableSet(ctx, w.up, w.emu, cfg)
	if err != nil {
		return nil, err
	}
	bridge, resume, err := adapter.OpenBridge(ctx, w.up, w.emu, cfg, tables)
	if err != nil {
		return nil, err
	}
	p := &pipeline{bridge: bridge, resume: resume, tables: tables}
	// Before the runtime delivers anything: the new epoch, the stored
	// progress, a fresh checkpoint history.
	w.chk.started(resume)
	w.cur = p
	p.storeSrc = w.c.NewSource(fakeupstream.SourceConfig{})
	store, err := schemastore.New(schemastore.Config{Dir: filepath.Join(w.adapterDir, "schemastore"), Snapshot: w.c, Source: p.storeSrc, InitialTs: resume.StartTs})
	if err != nil {
		_ = p.storeSrc.Close()
		_ = bridge.Release()
		w.cur = nil
		return nil, err
	}
	p.store = store
	p.tblSrc = w.c.NewSource(fakeupstream.SourceConfig{})
	p.manual = &manualSource{src: p.tblSrc, fail: make(chan error, 1)}
	ids := make([]int64, len(tables))
	for i, t := range tables {
		ids[i] = t.PhysicalID
	}
	// The adapter's callback chain: the live table set (TRUNCATE and
	// partition DDLs followed in place) over the checker's tap and the
	// bridge; a row mutant sits in front of all of it.
	live, attach := adapter.LiveCallbacks(w.up, bridge, cfg, tables)
	cb := w.mutateTap(live)
	opts := minicdc.ManualControl(minicdc.Options{})
	rt, err := minicdc.Start(ctx, minicdc.StartConfig{StartTs: resume.StartTs, TableIDs: ids, TableStartTs: adapter.TableStarts(resume, 0, tables), DDLPollLimit: 8},
		minicdc.Deps{
			Clock:       w.c,
			SchemaStore: store,
			Source:      p.manual,
			NewDecoder: func(int64) (minicdc.RowDecoder, error) {
				return mounter.New(mounter.Config{RequireOldValue: true}), nil
			},
			TableSpan: func(ks uint32, nextGen bool, id int64) (kvevent.Span, error) {
				return tablecodec.TableRecordSpan(ks, nextGen, id), nil
			},
			Time: w.clk,
		}, cb, opts)
	if err != nil {
		_ = p.storeSrc.Close()
		_ = bridge.Release()
		w.cur = nil
		return nil, err
	}
	p.rt = rt
	attach(rt)
	return p, nil
}

// pumpStore delivers what the schema store's source has ready.
func (p *pipeline) pumpStore() {
	if p.closed || p.storeErr != nil {
		return
	}
	if err := p.storeSrc.Pump(); err != nil {
		// As in the adapter (storeFeed), the store just stops following;
		// the runtime's readiness waits then time out and name it.
		p.storeErr = err
	}
}

// pumpTables delivers what the tables' source has ready to the runtime.
// A fatal protocol error stops the runtime (trigger "source"); it waits
// for that stop so what follows does not depend on scheduling.
func (p *pipeline) pumpTables(w *world) {
	if p.closed || p.failed || (p.rt != nil && p.rt.Err() != nil) {
		return
	}
	w.inTablePump = true
	err := p.tblSrc.Pump()
	w.inTablePump = false
	if err != nil {
		// During Start (rt not set yet) the error stops the startup.
		p.failed = true
		p.manual.fail <- err
		if p.rt != nil {
			<-p.rt.Done()
		}
	}
}

// control steps the runtime's control loop until it has nothing more to
// do at once (DDL poll, checkpoint).
func (p *pipeline) control() {
	if p.closed || p.rt == nil {
		return
	}
	for i := 0; i < 64; i++ {
		more, _, err := p.rt.ControlStep()
		if err != nil || !more {
			return
		}
	}
}

// stopped returns the runtime's fatal error (nil while it runs).
func (p *pipeline) stopped() error {
	if p.rt == nil {
		return nil
	}
	return p.rt.Err()
}

// close stops the adapter as adapter.Close does: the runtime (which
// closes its source and the schema store), the reorder buffers, the
// store's source. It returns the runtime's fatal error, if any.
func (p *pipeline) close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	var err error
	if p.rt != nil {
		err = p.rt.Close()
	}
	if rerr := p.bridge.Release(); err == nil && rerr != nil {
		err = fmt.Errorf("releasing the reorder buffers: %w", rerr)
	}
	_ = p.storeSrc.Close()
	return err
}

// tableSetChanged reports whether err is the bridge's table-set change
// (the supervisor restarts the adapter over the new tables).
func tableSetChanged(err error) bool {
	var tc *normalize.TableSetChangedError
	return errors.As(err, &tc)
}
