package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/searchfabric/sfemu/cmd/sfemu/pipeline"
	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/grpcapi"
	"github.com/searchfabric/sfemu/emulator/httpapi"
	"github.com/searchfabric/sfemu/fakeupstream/demo"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
)

// runConfig is everything `sfemu run` is configured with. A config file
// (JSON, keys as the json tags) sets defaults; flags given on the command
// line win.
type runConfig struct {
	DataDir        string        `json:"data_dir"`
	HTTP           string        `json:"http"`
	GRPC           string        `json:"grpc"`
	PD             string        `json:"pd"`
	Tables         string        `json:"tables"`
	StartTs        uint64        `json:"start_ts"`
	Seed           int64         `json:"seed"`
	Rate           int           `json:"rate"`
	DDLEvery       int           `json:"ddl_every"`
	StatusInterval time.Duration `json:"status_interval"`
	Token          string        `json:"token"`
	Keep           bool          `json:"keep"`
}

func defaultRunConfig() runConfig {
	return runConfig{
		DataDir:        "./var/sfemu",
		HTTP:           "127.0.0.1:8080",
		GRPC:           "127.0.0.1:9090",
		Seed:           1,
		Rate:           200,
		DDLEvery:       2000,
		StatusInterval: 5 * time.Second,
	}
}

func newRunCmd() *cobra.Command {
	cfg := defaultRunConfig()
	var configFile string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "run the emulator with the embedded upstream, the demo workload and the Mini-CDC adapter",
		Long: `Starts, in one process:
  - an embedded TiKV-style cluster with a SQL front (in memory),
  - the demo schema: demo.products (text, vector, numeric and JSON columns)
    and demo.events (hash-partitioned, 4 partitions),
  - a steady demo workload (inserts, updates, deletes, an occasional DDL),
  - the Mini-CDC adapter mirroring both tables into collections
    demo.products and demo.events,
  - the emulator's HTTP API (search, documents, progress, metrics) and gRPC
    API on loopback, plus POST /upstream/sql to change the upstream.
Prints one status line every --status-interval and one line with the
reason when the adapter stops on a fatal error.

Real-cluster mode (--pd with --tables) is not wired into sfemu run yet (the
gRPC KV source exists in upstream/logpuller and upstream/pd): it exits with a
message.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if configFile != "" {
				if err := loadConfigFile(configFile, &cfg, cmd.Flags()); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runEmbedded(ctx, cfg, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&configFile, "config", "", "JSON config file (keys: data_dir, http, grpc, pd, tables, start_ts, seed, rate, ddl_every, status_interval, token, keep); flags override it")
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory for the emulator's collections and the schema store")
	f.StringVar(&cfg.HTTP, "http", cfg.HTTP, "HTTP API listen address (an empty host binds 127.0.0.1)")
	f.StringVar(&cfg.GRPC, "grpc", cfg.GRPC, "gRPC API listen address (an empty host binds 127.0.0.1); empty disables gRPC")
	f.StringVar(&cfg.PD, "pd", cfg.PD, "real-cluster mode: PD addresses (not wired into sfemu run yet; exits with a message)")
	f.StringVar(&cfg.Tables, "tables", cfg.Tables, "real-cluster mode: tables to mirror, db.t1,db.t2")
	f.Uint64Var(&cfg.StartTs, "start-ts", cfg.StartTs, "real-cluster mode: start ts (0 = now or the stored progress)")
	f.Int64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the embedded cluster and the demo workload")
	f.IntVar(&cfg.Rate, "rate", cfg.Rate, "demo workload transactions per second (0 = no workload)")
	f.IntVar(&cfg.DDLEvery, "ddl-every", cfg.DDLEvery, "demo workload: one DDL every N transactions (0 = none)")
	f.DurationVar(&cfg.StatusInterval, "status-interval", cfg.StatusInterval, "time between status lines")
	f.StringVar(&cfg.Token, "token", cfg.Token, "bearer token the HTTP and gRPC APIs require (empty = none)")
	f.BoolVar(&cfg.Keep, "keep", cfg.Keep, "keep an existing data dir (by default a previous run's state is removed: the embedded upstream lives in memory, so that state belongs to an upstream that no longer exists)")
	return cmd
}

// loadConfigFile reads a JSON config into cfg, keeping every flag the user
// set on the command line.
func loadConfigFile(path string, cfg *runConfig, flags *pflag.FlagSet) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var fileCfg struct {
		runConfig
		StatusInterval string `json:"status_interval"`
	}
	fileCfg.runConfig = *cfg
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fileCfg); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	if fileCfg.StatusInterval != "" {
		d, err := time.ParseDuration(fileCfg.StatusInterval)
		if err != nil {
			return fmt.Errorf("config file %s: status_interval: %w", path, err)
		}
		fileCfg.runConfig.StatusInterval = d
	}
	merged := fileCfg.runConfig
	set := func(name string, apply func()) {
		if flags.Changed(name) {
			apply()
		}
	}
	set("data-dir", func() { merged.DataDir = cfg.DataDir })
	set("http", func() { merged.HTTP = cfg.HTTP })
	set("grpc", func() { merged.GRPC = cfg.GRPC })
	set("pd", func() { merged.PD = cfg.PD })
	set("tables", func() { merged.Tables = cfg.Tables })
	set("start-ts", func() { merged.StartTs = cfg.StartTs })
	set("seed", func() { merged.Seed = cfg.Seed })
	set("rate", func() { merged.Rate = cfg.Rate })
	set("ddl-every", func() { merged.DDLEvery = cfg.DDLEvery })
	set("status-interval", func() { merged.StatusInterval = cfg.StatusInterval })
	set("token", func() { merged.Token = cfg.Token })
	set("keep", func() { merged.Keep = cfg.Keep })
	*cfg = merged
	return nil
}

// errRealClusterNotBuilt is the real-cluster mode's answer until the gRPC
// KV source exists.
var errRealClusterNotBuilt = errors.New("real-cluster mode (--pd) is not wired into sfemu run yet: the gRPC KV source (upstream/logpuller, upstream/pd) is built and tested but the run command does not use it; run without --pd to use the embedded upstream")

var demoTables = []pipeline.TableRef{{DB: demo.Database, Table: "products"}, {DB: demo.Database, Table: "events"}}

func runEmbedded(ctx context.Context, cfg runConfig, out io.Writer) error {
	if cfg.PD != "" || cfg.Tables != "" {
		return errRealClusterNotBuilt
	}
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = 5 * time.Second
	}
	httpAddr, err := httpapi.LoopbackAddr(cfg.HTTP)
	if err != nil {
		return fmt.Errorf("--http: %w", err)
	}
	if !cfg.Keep {
		for _, sub := range []string{"emulator", "schemastore"} {
			p := filepath.Join(cfg.DataDir, sub)
			if _, err := os.Stat(p); err == nil {
				fmt.Fprintf(out, "sfemu: removing %s from a previous run (the embedded upstream is in memory; --keep keeps it)\n", p)
				if err := os.RemoveAll(p); err != nil {
					return err
				}
			}
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return err
	}

	up, err := pipeline.NewUpstream(ctx, pipeline.UpstreamConfig{Seed: cfg.Seed, RealClock: true})
	if err != nil {
		return err
	}
	if err := demo.Setup(ctx, up.SQL.NewSession("")); err != nil {
		return err
	}
	emu, err := emulator.Open(filepath.Join(cfg.DataDir, "emulator"), emulator.Options{})
	if err != nil {
		return err
	}
	defer emu.Close()
	// The adapter stops through Close or a fatal error, never through the
	// signal context: shutdown closes it explicitly, in order.
	actx := context.WithoutCancel(ctx)
	// The supervisor restarts the adapter with the new physical tables when
	// a DDL changes them (TRUNCATE, partition DDLs), so no row is lost.
	adapterCfg := pipeline.AdapterConfig{DataDir: cfg.DataDir, Tables: demoTables}
	sup, err := pipeline.StartSupervisor(actx, up, emu, adapterCfg, out)
	if err != nil {
		return fmt.Errorf("starting the adapter: %w", err)
	}
	defer func() { _ = sup.Close() }()
	adapter := sup.Adapter()

	api, err := httpapi.New(httpapi.Options{Backend: emu, Token: cfg.Token, Gatherer: emu.Registry()})
	if err != nil {
		return err
	}
	restarts := make(chan chan restartResult)
	mux := http.NewServeMux()
	mux.Handle("/upstream/sql", sqlHandler(up, cfg.Token))
	mux.Handle("/admin/restart-adapter", restartHandler(restarts, cfg.Token))
	var pause sync.Mutex // held by a workload step, and by a consistency check
	mux.Handle("/admin/check", checkHandler(up, emu, &pause, cfg.Token))
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
	fmt.Fprintf(out, "sfemu: running: http=%s grpc=%s data-dir=%s start-ts=%d epoch=%d collections=%s workload=%d tx/s\n",
		hs.URL(), grpcAddr, cfg.DataDir, adapter.RT.StartTs(), adapter.Resume.Epoch, collectionNames(), cfg.Rate)

	wctx, wcancel := context.WithCancel(ctx)
	workErr := make(chan error, 1)
	go func() { workErr <- runWorkload(wctx, up, cfg, &pause) }()
	defer func() { wcancel(); <-workErr }()

	tick := time.NewTicker(cfg.StatusInterval)
	defer tick.Stop()
	last, lastAt := adapter.RT.Stats(), time.Now()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(out, "sfemu: shutting down")
			wcancel()
			if err := sup.Close(); err != nil {
				return fmt.Errorf("adapter stopped: %w", err)
			}
			return nil
		case <-sup.Done():
			err := sup.Close()
			if err == nil {
				err = errors.New("stopped without an error")
			}
			return fmt.Errorf("adapter stopped: %w", err)
		case <-hs.Done():
			return fmt.Errorf("http server stopped: %w", hs.Err())
		case err := <-workErr:
			workErr <- err // for the deferred wait
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("demo workload stopped: %w", err)
			}
		case reply := <-restarts:
			// Stop the adapter and start a new one on the same emulator and
			// schema store: it resumes from the emulator's stored progress
			// with the next epoch (the upstream keeps running meanwhile).
			if err := sup.Close(); err != nil {
				reply <- restartResult{Err: err.Error()}
				return fmt.Errorf("adapter stopped: %w", err)
			}
			next, err := pipeline.StartSupervisor(actx, up, emu, adapterCfg, out)
			if err != nil {
				reply <- restartResult{Err: err.Error()}
				return fmt.Errorf("restarting the adapter: %w", err)
			}
			sup = next
			adapter = sup.Adapter()
			last, lastAt = adapter.RT.Stats(), time.Now()
			fmt.Fprintf(out, "sfemu: adapter restarted: start-ts=%d epoch=%d\n", adapter.RT.StartTs(), adapter.Resume.Epoch)
			reply <- restartResult{StartTs: adapter.RT.StartTs(), Epoch: adapter.Resume.Epoch}
		case <-tick.C:
			now := time.Now()
			if cur := sup.Adapter(); cur != adapter {
				// The supervisor restarted it for a table-set change: its
				// counters start from zero.
				adapter = cur
				last = minicdc.Stats{}
			}
			st := adapter.RT.Stats()
			fmt.Fprintln(out, statusLine(ctx, up, emu, adapter, last, st, now.Sub(lastAt)))
			last, lastAt = st, now
		}
	}
}

func collectionNames() string {
	var names []string
	for _, t := range demoTables {
		names = append(names, normalize.DefaultCollectionName(t.DB, t.Table))
	}
	return strings.Join(names, ",")
}

func runWorkload(ctx context.Context, up *pipeline.Upstream, cfg runConfig, pause *sync.Mutex) error {
	if cfg.Rate <= 0 {
		return nil
	}
	w := demo.NewWorkload(cfg.Seed, up.SQL.NewSession(""))
	w.DDLEvery = cfg.DDLEvery
	w.Now = func() string { return time.Now().UTC().Format("2006-01-02 15:04:05.000") }
	interval := time.Second / time.Duration(cfg.Rate)
	t := time.NewTicker(max(interval, time.Millisecond))
	defer t.Stop()
	var st demo.Stats
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		// At high rates one tick runs several steps.
		n := max(1, cfg.Rate/1000)
		pause.Lock()
		for i := 0; i < n; i++ {
			if err := w.Step(ctx, &st); err != nil {
				pause.Unlock()
				return err
			}
		}
		pause.Unlock()
	}
}

// statusLine: rows/s since the last line, rows buffered in the reorder
// buffers, DDLs so far, the last checkpoint, and per collection how far
// safe_ts trails the upstream's current ts.
func statusLine(ctx context.Context, up *pipeline.Upstream, emu *emulator.Emulator, a *pipeline.Adapter, prev, cur minicdc.Stats, d time.Duration) string {
	rate := float64(cur.RowsDelivered-prev.RowsDelivered) / d.Seconds()
	var b strings.Builder
	buffered := 0
	for _, ps := range a.Bridge.Stats() {
		buffered += ps.UnsealedRows + ps.SealedRows
	}
	fmt.Fprintf(&b, "sfemu: rows/s=%.0f rows=%d buffered=%d ddls=%d checkpoint_ts=%d", rate, cur.RowsDelivered, buffered, cur.DDLsDelivered, cur.LastCheckpointTs)
	now, err := up.Cluster.CurrentTs(ctx)
	list, lerr := emu.ListCollections(ctx, &apiv1.ListCollectionsRequest{})
	if err == nil && lerr == nil {
		cols := list.GetCollections()
		sort.Slice(cols, func(i, j int) bool { return cols[i].GetDefinition().GetName() < cols[j].GetDefinition().GetName() })
		for _, c := range cols {
			lag := time.Duration(int64(now>>18)-int64(c.GetSafeTs()>>18)) * time.Millisecond
			fmt.Fprintf(&b, " %s(safe_ts_lag=%v)", c.GetDefinition().GetName(), lag)
		}
	}
	return b.String()
}

type restartResult struct {
	StartTs uint64 `json:"start_ts"`
	Epoch   uint64 `json:"epoch"`
	Err     string `json:"error,omitempty"`
}

// restartHandler serves POST /admin/restart-adapter: the run loop restarts
// the adapter and answers with its resume point.
func restartHandler(restarts chan<- chan restartResult, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(restartResult{Err: "missing or wrong bearer token"})
			return
		}
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			_ = json.NewEncoder(w).Encode(restartResult{Err: "use POST"})
			return
		}
		reply := make(chan restartResult, 1)
		select {
		case restarts <- reply:
		case <-r.Context().Done():
			return
		}
		res := <-reply
		if res.Err != "" {
			w.WriteHeader(http.StatusInternalServerError)
		}
		_ = json.NewEncoder(w).Encode(res)
	})
}

type checkResult struct {
	Ts    uint64   `json:"ts"`
	OK    bool     `json:"ok"`
	Diffs []string `json:"diffs"`
	Err   string   `json:"error,omitempty"`
}

// checkHandler serves GET /admin/check: it pauses the demo workload, takes
// the upstream's current ts, waits until every demo collection's safe_ts
// reaches it, and compares the collections with the tables read by
// snapshot at that ts (pipeline.CheckConsistency). Writes sent through
// /upstream/sql during the check can show up as differences.
func checkHandler(up *pipeline.Upstream, emu *emulator.Emulator, pause *sync.Mutex, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(checkResult{Err: "missing or wrong bearer token"})
			return
		}
		pause.Lock()
		defer pause.Unlock()
		ctx := r.Context()
		ts, err := up.Cluster.CurrentTs(ctx)
		if err == nil {
			err = pipeline.WaitSafe(ctx, emu, demoTables, ts, 30*time.Second)
		}
		var diffs []pipeline.Diff
		if err == nil {
			diffs, err = pipeline.CheckConsistency(ctx, up, emu, demoTables, ts)
		}
		res := checkResult{Ts: ts, OK: err == nil && len(diffs) == 0, Diffs: []string{}}
		for _, d := range diffs {
			res.Diffs = append(res.Diffs, d.String())
		}
		if err != nil {
			res.Err = err.Error()
			w.WriteHeader(http.StatusInternalServerError)
		}
		_ = json.NewEncoder(w).Encode(res)
	})
}
