package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/adapter/workload"
	"github.com/searchfabric/sfemu/emulator"
	"github.com/searchfabric/sfemu/emulator/grpcapi"
	"github.com/searchfabric/sfemu/emulator/httpapi"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/snapshot"
)

// serve runs the adapter, the APIs and (embedded) the demo workload until
// ctx ends or something fails.
func serve(ctx context.Context, cfg runConfig, out io.Writer, s session) error {
	up := s.up
	httpAddr, err := httpapi.LoopbackAddr(cfg.HTTP)
	if err != nil {
		return fmt.Errorf("--http: %w", err)
	}
	pprofOn, err := pprofEnabled(cfg.Pprof, httpAddr)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "sfemu: upstream %s tables=%s\n", modeLine(up), refNames(s.tables))
	// A text index past its memory budget moves to bleve's disk-backed
	// scratch segments (TXT-M7); keep them on the data dir's disk, not in
	// the RAM-backed default (/dev/shm), so the move frees memory.
	vb, err := cfg.vectorBudget()
	if err != nil {
		return err
	}
	emu, err := emulator.Open(filepath.Join(cfg.DataDir, "emulator"), emulator.Options{
		TextScratchDir:     filepath.Join(cfg.DataDir, "text-scratch"),
		VectorMemoryBudget: vb,
	})
	if err != nil {
		return err
	}
	defer emu.Close()
	// The adapter stops through Close or a fatal error, never through the
	// signal context: shutdown closes it explicitly, in order.
	actx := context.WithoutCancel(ctx)
	// The adapter follows table-set changes (TRUNCATE, partition DDLs, a
	// --tables filter's new tables) in place (specs/tableset.md).
	view := newStatusView(up)
	mem, err := cfg.adapterMemory()
	if err != nil {
		return err
	}
	gcLimit := mem.LimitGC(adapter.UnchargedLive(mem.Quota)) // RS11: the emulator is in process
	defer gcLimit.Stop()
	view.mu.Lock()
	view.mem = mem
	view.mu.Unlock()
	adapterCfg := adapter.Config{DataDir: cfg.DataDir, Tables: s.tables, Filter: s.filter, StartTs: cfg.StartTs, GC: s.gc, Tap: view.tap(), Memory: mem, Phase: view}
	if adapterCfg.Snapshot, err = cfg.snapshotConfig(); err != nil {
		return err
	}
	// The snapshot reports to the terminal and /v1/progress/snapshot, and
	// stops on Ctrl-C (its state resumes it), unlike the stream, which
	// shutdown closes in order.
	snapshotProgress := &snapshot.Progress{}
	view.watchSnapshot(snapshotProgress) // the page's `snapshotting` state (SR13)
	adapterCfg.Snapshot.Log, adapterCfg.Snapshot.Progress, adapterCfg.Snapshot.Stop = out, snapshotProgress, ctx.Done()

	// The status page's board samples for its plots while the binary runs.
	board := httpapi.NewBoard(httpapi.BoardConfig{Backend: emu, Provider: view, Gatherer: emu.Registry()})
	bctx, stopBoard := context.WithCancel(ctx)
	boardDone := make(chan struct{})
	go func() { defer close(boardDone); board.Run(bctx) }()
	defer func() { stopBoard(); <-boardDone }()
	api, err := httpapi.New(httpapi.Options{Backend: emu, Token: cfg.Token, Gatherer: gatherer(emu.Registry(), view), Pprof: pprofOn, Board: board})
	if err != nil {
		return err
	}
	restarts := make(chan chan restartResult)
	mux := http.NewServeMux()
	if s.demo {
		mux.Handle("/upstream/sql", prettyJSON(sqlHandler(up, cfg.Token)))
	}
	mux.Handle("/v1/progress/snapshot", prettyJSON(snapshotProgressHandler(snapshotProgress, cfg.Token)))
	mux.Handle("/admin/restart-adapter", prettyJSON(restartHandler(restarts, cfg.Token)))
	var pause sync.Mutex // held by a workload step, and by a consistency check
	checked := func() []adapter.TableRef { return s.tables }
	if s.filter != nil { // the set follows the filter: check what is mirrored now (LT1)
		checked = func() []adapter.TableRef {
			if a := view.currentAdapter(); a != nil {
				return a.MirroredTables()
			}
			return s.tables
		}
	}
	mux.Handle("/admin/check", noWriteTimeout(prettyJSON(checkHandler(up, emu, checked, &pause, cfg.Token, !s.demo))))
	mux.Handle("/admin/tables", prettyJSON(tablesHandler(view.currentAdapter, cfg.Token)))
	mux.Handle("/", api)
	hs, err := httpapi.Start(httpAddr, mux)
	if err != nil {
		return fmt.Errorf("--http %s: %w", httpAddr, err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	grpcAddr := "off"
	if cfg.GRPC != "" {
		addr, err := httpapi.LoopbackAddr(cfg.GRPC)
		if err != nil {
			return fmt.Errorf("--grpc: %w", err)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("--grpc %s: %w", addr, err)
		}
		gs := grpcapi.NewServer(emu, grpcapi.Options{Token: cfg.Token})
		go func() { _ = gs.Serve(ln) }()
		defer gs.Stop()
		grpcAddr = ln.Addr().String()
	}
	// The APIs serve while the adapter starts: an initial snapshot's rows
	// are searchable as they land, and its progress is on
	// /v1/progress/snapshot.
	sup, err := adapter.StartSupervisor(actx, up, emu, adapterCfg, out)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(out, "sfemu: stopped while the adapter started (an interrupted snapshot resumes on the next run)")
			return nil
		}
		return fmt.Errorf("starting the adapter: %w", err)
	}
	defer func() { _ = sup.Close() }()
	ad := sup.Adapter()
	view.running(sup, false)

	load := "none"
	var w *workload.Runner
	if s.demo {
		load = fmt.Sprintf("%d tx/s", cfg.Rate)
		if w, err = workload.New(ctx, up.SQL, up.Clock(), workload.Config{Seed: cfg.Seed, Rate: cfg.Rate, DDLEvery: cfg.DDLEvery}); err != nil {
			return err
		}
	}
	mysqlAddr := "off"
	if s.mysql != nil {
		mysqlAddr = s.mysql.Addr()
	}
	fmt.Fprintf(out, "sfemu: running: http=%s grpc=%s mysql=%s %s data-dir=%s start-ts=%d epoch=%d collections=%s workload=%s %s\n",
		hs.URL(), grpcAddr, mysqlAddr, modeLine(up), cfg.DataDir, ad.RT.StartTs(), ad.Resume.Epoch, collectionNames(s.tables), load,
		stateWords(s.restored, ad))

	// The writers (demo workload, MySQL clients) stop first, then the
	// adapter (deferred above), then the emulator; the caller closes the
	// upstream last.
	wctx, wcancel := context.WithCancel(ctx)
	workDone := make(chan struct{})
	var workErr error
	go func() {
		defer close(workDone)
		if s.demo {
			workErr = w.Run(wctx, &pause)
		}
	}()
	stopWriters := sync.OnceFunc(func() {
		wcancel()
		<-workDone
		if s.mysql != nil {
			_ = s.mysql.Close()
		}
	})
	defer stopWriters()
	wdone := (<-chan struct{})(workDone)
	if !s.demo {
		wdone = nil
	}

	tick := time.NewTicker(cfg.StatusInterval)
	defer tick.Stop()
	last, lastAt := ad.RT.Stats(), time.Now()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(out, "sfemu: shutting down")
			stopWriters()
			if err := sup.Close(); err != nil {
				return fmt.Errorf("adapter stopped: %w", err)
			}
			return nil
		case <-sup.Done():
			err := sup.Close()
			if err == nil {
				err = errors.New("stopped without an error")
			}
			view.stopped(err)
			return fmt.Errorf("adapter stopped: %w", err)
		case <-hs.Done():
			return fmt.Errorf("http server stopped: %w", hs.Err())
		case <-wdone:
			wdone = nil
			if workErr != nil && ctx.Err() == nil {
				return fmt.Errorf("demo workload stopped: %w", workErr)
			}
		case reply := <-restarts:
			// Stop the adapter and start a new one on the same emulator and
			// schema store: it resumes from the emulator's stored progress
			// with the next epoch (the upstream keeps running meanwhile).
			view.setState(httpapi.AdapterRestarting, "restart requested over /admin/restart-adapter")
			if err := sup.Close(); err != nil {
				reply <- restartResult{Err: err.Error()}
				return fmt.Errorf("adapter stopped: %w", err)
			}
			next, err := adapter.StartSupervisor(actx, up, emu, adapterCfg, out)
			if err != nil {
				reply <- restartResult{Err: err.Error()}
				return fmt.Errorf("restarting the adapter: %w", err)
			}
			sup = next
			ad = sup.Adapter()
			view.running(sup, true)
			last, lastAt = ad.RT.Stats(), time.Now()
			fmt.Fprintf(out, "sfemu: adapter restarted: start-ts=%d epoch=%d\n", ad.RT.StartTs(), ad.Resume.Epoch)
			reply <- restartResult{StartTs: ad.RT.StartTs(), Epoch: ad.Resume.Epoch}
		case <-tick.C:
			now := time.Now()
			if cur := sup.Adapter(); cur != ad {
				// The supervisor does not replace its adapter today
				// (table-set changes are followed in place,
				// specs/tableset.md LT2; the restart above sets ad
				// itself): should one ever appear, its counters start
				// from zero.
				ad = cur
				last = minicdc.Stats{}
			}
			st := ad.RT.Stats()
			fmt.Fprintln(out, statusLine(ctx, up, emu, adapterCfg.Memory, ad, last, st, now.Sub(lastAt)))
			for _, p := range progressLines(ctx, board, now) {
				fmt.Fprintln(out, "sfemu: "+p)
			}
			last, lastAt = st, now
		}
	}
}
