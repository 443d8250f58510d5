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

	"github.com/pingcap/log"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/adapter/datadir"
	"github.com/searchfabric/sfemu/adapter/workload"
	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/grpcapi"
	"github.com/searchfabric/sfemu/emulator/httpapi"
	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/demo"
	"github.com/searchfabric/sfemu/fakeupstream/kvlog"
	"github.com/searchfabric/sfemu/fakeupstream/mysqlfront"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/upstream/pd"
	"github.com/searchfabric/sfemu/verify"
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
	Fresh          bool          `json:"fresh"`
	MySQL          string        `json:"mysql"`
	InProcess      bool          `json:"in_process"`
	PDTimeout      time.Duration `json:"pd_timeout"`
	Pprof          string        `json:"pprof"`
}

func defaultRunConfig() runConfig {
	return runConfig{
		DataDir:        "./var/sfemu",
		HTTP:           "127.0.0.1:8080",
		GRPC:           "127.0.0.1:9090",
		MySQL:          "127.0.0.1:4000",
		Seed:           1,
		Rate:           200,
		DDLEvery:       2000,
		StatusInterval: 5 * time.Second,
		PDTimeout:      adapter.DefaultConnectTimeout,
		Pprof:          "auto",
	}
}

func newRunCmd() *cobra.Command {
	cfg := defaultRunConfig()
	var configFile string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "run the emulator and the Mini-CDC adapter (embedded demo upstream, or a real TiDB cluster with --pd)",
		Long: `Embedded mode (the default) starts, in one process:
  - an embedded TiKV-style cluster with a SQL front, persisted under
    <data-dir>/upstream, and its PD and TiKV gRPC servers on loopback ports
    chosen at start; a MySQL-protocol front on --mysql (default
    127.0.0.1:4000: mysql -h 127.0.0.1 -P 4000 -u root),
  - the demo schema: demo.products (text, vector, numeric and JSON columns)
    and demo.events (hash-partitioned, 4 partitions), created on the first
    run only,
  - a steady demo workload (inserts, updates, deletes, an occasional DDL),
  - the Mini-CDC adapter mirroring both tables into collections
    demo.products and demo.events; it reads the embedded cluster over gRPC
    through the real PD client, client-go and the EventFeed log puller,
    exactly as it reads a real cluster (--in-process reads it in process
    instead),
  - the emulator's HTTP API (search, documents, progress, metrics) and gRPC
    API on loopback, plus POST /upstream/sql to change the upstream,
    GET /admin/check (collections vs the upstream read by snapshot) and
    POST /admin/restart-adapter.
Stopping it (Ctrl-C, or a crash) and running it again on the same data dir
resumes: the upstream reopens with every acknowledged commit, the workload
continues its ids, and the adapter resumes from the collections' stored
progress with the next epoch. --fresh removes the data dir's previous state
first.

Real-cluster mode (--pd host:port[,host:port] --tables db.t1,db.t2) connects
to a TiDB cluster's PD instead: no embedded cluster, no demo workload, no
/upstream/sql. The tables must exist at the start ts (--start-ts, default
the stored progress or now); a start ts below the cluster's GC safe point
is refused. The adapter delivers the changes committed after its start ts
(no initial load): start at the tables' creation to mirror every row.
While running, the adapter holds a PD service GC safe point at
its checkpoint (removed on a clean stop). The data dir is kept across runs
and resumes from the stored progress; it is bound to the first cluster it
mirrored.

The first line says the mode and the PD address. Then one status line every
--status-interval, and one line with the reason when the adapter stops on a
fatal error. The PD client's and client-go's own log lines (warnings and
errors) go to <data-dir>/client.log.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if configFile != "" {
				if err := loadConfigFile(configFile, &cfg, cmd.Flags()); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runMain(ctx, cfg, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&configFile, "config", "", "JSON config file (keys: data_dir, http, grpc, mysql, pd, tables, start_ts, seed, rate, ddl_every, status_interval, token, fresh, in_process, pd_timeout, pprof); flags override it")
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory for the embedded upstream (upstream/), the emulator's collections, the schema store, upstream.json (which upstream the state belongs to) and client.log; a rerun on it resumes")
	f.StringVar(&cfg.HTTP, "http", cfg.HTTP, "HTTP API listen address (an empty host binds 127.0.0.1)")
	f.StringVar(&cfg.GRPC, "grpc", cfg.GRPC, "gRPC API listen address (an empty host binds 127.0.0.1); empty disables gRPC")
	f.StringVar(&cfg.MySQL, "mysql", cfg.MySQL, "embedded mode: MySQL-protocol front of the embedded upstream (an empty host binds 127.0.0.1); empty disables it")
	f.StringVar(&cfg.PD, "pd", cfg.PD, "real-cluster mode: PD addresses, host:port[,host:port...] (requires --tables)")
	f.StringVar(&cfg.Tables, "tables", cfg.Tables, "real-cluster mode: tables to mirror, db.t1,db.t2 (collection names db.t1, db.t2)")
	f.Uint64Var(&cfg.StartTs, "start-ts", cfg.StartTs, "real-cluster mode: ts to start from when the data dir has no stored progress (0 = now); must be at or above the GC safe point")
	f.DurationVar(&cfg.PDTimeout, "pd-timeout", cfg.PDTimeout, "real-cluster mode: how long to try reaching PD before giving up")
	f.BoolVar(&cfg.InProcess, "in-process", cfg.InProcess, "embedded mode: read the embedded cluster in process instead of over its gRPC servers (no PD client, client-go or log puller)")
	f.Int64Var(&cfg.Seed, "seed", cfg.Seed, "embedded mode: seed of the embedded cluster and the demo workload")
	f.IntVar(&cfg.Rate, "rate", cfg.Rate, "embedded mode: demo workload transactions per second (0 = no workload)")
	f.IntVar(&cfg.DDLEvery, "ddl-every", cfg.DDLEvery, "embedded mode: one demo DDL every N transactions (0 = none)")
	f.DurationVar(&cfg.StatusInterval, "status-interval", cfg.StatusInterval, "time between status lines")
	f.StringVar(&cfg.Token, "token", cfg.Token, "bearer token the HTTP and gRPC APIs require (empty = none)")
	f.StringVar(&cfg.Pprof, "pprof", cfg.Pprof, "serve Go profiles on the HTTP listener under /debug/pprof/: auto (only when it is bound to loopback), on, off")
	f.BoolVar(&cfg.Fresh, "fresh", cfg.Fresh, "embedded mode: remove the data dir's previous state (upstream, collections, schema store) and start over; without it a run resumes where the previous one stopped")
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
		PDTimeout      string `json:"pd_timeout"`
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
	if fileCfg.PDTimeout != "" {
		d, err := time.ParseDuration(fileCfg.PDTimeout)
		if err != nil {
			return fmt.Errorf("config file %s: pd_timeout: %w", path, err)
		}
		fileCfg.runConfig.PDTimeout = d
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
	set("fresh", func() { merged.Fresh = cfg.Fresh })
	set("mysql", func() { merged.MySQL = cfg.MySQL })
	set("in-process", func() { merged.InProcess = cfg.InProcess })
	set("pd-timeout", func() { merged.PDTimeout = cfg.PDTimeout })
	set("pprof", func() { merged.Pprof = cfg.Pprof })
	*cfg = merged
	return nil
}

var demoTables = []adapter.TableRef{{DB: demo.Database, Table: "products"}, {DB: demo.Database, Table: "events"}}

// session is what the serve loop runs: the upstream, the mirrored tables
// and whether the demo (workload, /upstream/sql) belongs to it.
type session struct {
	up     *adapter.Upstream
	tables []adapter.TableRef
	demo   bool
	// gc is the service GC safe point config of the adapter.
	gc pd.ServiceSafePointConfig
	// mysql is the embedded upstream's MySQL front (nil: none); it stops
	// with the workload, before the adapter.
	mysql *mysqlfront.Server
	// restored is what the embedded upstream found in its dir (nil in
	// real-cluster mode).
	restored *fakeupstream.RestoreStats
}

// runMain checks the flags, picks the mode and runs it.
func runMain(ctx context.Context, cfg runConfig, out io.Writer) error {
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = 5 * time.Second
	}
	if cfg.PD == "" {
		switch {
		case cfg.Tables != "":
			return errors.New("--tables needs --pd: the embedded mode mirrors the demo tables (demo.products, demo.events)")
		case cfg.StartTs != 0:
			return errors.New("--start-ts needs --pd: the embedded mode starts from its stored progress or now")
		}
	} else {
		switch {
		case cfg.InProcess:
			return errors.New("--in-process reads the embedded cluster; it cannot be combined with --pd")
		case cfg.Fresh:
			return errors.New("--fresh removes the embedded upstream's state; real-cluster mode (--pd) never removes state: use another --data-dir to start over")
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return err
	}
	// One sfemu per data dir: the lock is held until the process exits
	// (closing the file releases it), before anything is removed or opened.
	unlock, err := datadir.Lock(cfg.DataDir)
	if err != nil {
		return err
	}
	defer unlock()
	initClientLog(cfg.DataDir)
	if cfg.PD == "" {
		return runEmbedded(ctx, cfg, out)
	}
	return runReal(ctx, cfg, out)
}

// runEmbedded runs the embedded upstream, persisted under
// <data-dir>/upstream: a data dir from an earlier run resumes (the
// upstream reopens with its acknowledged commits, the demo schema is kept,
// the workload continues its ids, the adapter resumes from the stored
// progress with the next epoch); --fresh starts over.
func runEmbedded(ctx context.Context, cfg runConfig, out io.Writer) error {
	if cfg.Fresh {
		removed, err := datadir.RemoveState(cfg.DataDir)
		if err != nil {
			return fmt.Errorf("--fresh: %w", err)
		}
		if len(removed) > 0 {
			fmt.Fprintf(out, "sfemu: --fresh: removed the previous state of %s (%s)\n", cfg.DataDir, strings.Join(removed, ", "))
		}
	}
	if err := datadir.Bind(cfg.DataDir, datadir.Owner{Mode: "embedded"}); err != nil {
		return err
	}
	if err := datadir.CheckEmbedded(cfg.DataDir); err != nil {
		return err
	}
	var mysqlAddr string
	if cfg.MySQL != "" {
		a, err := httpapi.LoopbackAddr(cfg.MySQL)
		if err != nil {
			return fmt.Errorf("--mysql: %w", err)
		}
		mysqlAddr = a
	}
	updir := filepath.Join(cfg.DataDir, datadir.Upstream)
	up, err := adapter.NewUpstream(ctx, adapter.UpstreamConfig{Seed: cfg.Seed, RealClock: true, Wire: !cfg.InProcess, Dir: updir})
	if err != nil {
		if errors.Is(err, kvlog.ErrLocked) {
			return fmt.Errorf("the embedded upstream in %s is in use by another process: %w", updir, err)
		}
		return fmt.Errorf("opening the embedded upstream in %s: %w", updir, err)
	}
	// Runs after serve returned, so after the workload, the MySQL front
	// and the adapter stopped: PD client, gRPC servers, then the cluster.
	defer up.Close()
	if !demo.Exists(up.SQL) {
		if err := demo.Setup(ctx, up.SQL.NewSession("")); err != nil {
			return err
		}
	}
	restored := up.Cluster.Restored()
	s := session{up: up, tables: demoTables, demo: true, gc: datadir.GCConfig(cfg.DataDir), restored: &restored}
	if mysqlAddr != "" {
		ms, err := mysqlfront.StartConfig(up.SQL, mysqlfront.Config{Addr: mysqlAddr})
		if err != nil {
			return fmt.Errorf("--mysql %s: %w", mysqlAddr, err)
		}
		defer ms.Close()
		s.mysql = ms
	}
	return serve(ctx, cfg, out, s)
}

// runReal mirrors --tables of the cluster behind --pd.
func runReal(ctx context.Context, cfg runConfig, out io.Writer) error {
	tables, err := parseTables(cfg.Tables)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return err
	}
	timeout := cfg.PDTimeout
	if timeout <= 0 {
		timeout = adapter.DefaultConnectTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	up, err := adapter.ConnectUpstream(cctx, strings.Split(cfg.PD, ","))
	cancel()
	if err != nil {
		return fmt.Errorf("--pd %s: %w", cfg.PD, err)
	}
	defer up.Close()
	if err := datadir.Bind(cfg.DataDir, datadir.Owner{Mode: "real", ClusterID: up.PD.PD.ClusterID()}); err != nil {
		return err
	}
	return serve(ctx, cfg, out, session{up: up, tables: tables, gc: datadir.GCConfig(cfg.DataDir)})
}

// clientLogFile receives the PD client's and client-go's own log lines
// (level warn), so they stay out of the status output.
const clientLogFile = "client.log"

func initClientLog(dataDir string) {
	lg, props, err := log.InitLogger(&log.Config{Level: "warn", File: log.FileLogConfig{Filename: filepath.Join(dataDir, clientLogFile), MaxSize: 64, MaxBackups: 2}})
	if err == nil {
		log.ReplaceGlobals(lg, props)
	}
}

// parseTables parses --tables: db.t1,db.t2.
func parseTables(s string) ([]adapter.TableRef, error) {
	var out []adapter.TableRef
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		db, table, ok := strings.Cut(part, ".")
		if !ok || db == "" || table == "" || strings.Contains(table, ".") {
			return nil, fmt.Errorf("--tables: %q is not db.table", part)
		}
		if seen[strings.ToLower(part)] {
			return nil, fmt.Errorf("--tables: %q is listed twice", part)
		}
		seen[strings.ToLower(part)] = true
		out = append(out, adapter.TableRef{DB: db, Table: table})
	}
	if len(out) == 0 {
		return nil, errors.New("--pd needs --tables db.t1[,db.t2...]: the tables to mirror")
	}
	return out, nil
}

func modeLine(up *adapter.Upstream) string {
	pdAddr := "none"
	if addrs := up.PDAddrs(); len(addrs) > 0 {
		pdAddr = strings.Join(addrs, ",")
	}
	return fmt.Sprintf("mode=%s pd=%s", up.Mode(), pdAddr)
}

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
	view := newStatusView(up)
	adapterCfg := adapter.Config{DataDir: cfg.DataDir, Tables: s.tables, StartTs: cfg.StartTs, GC: s.gc, Tap: view.tap()}
	sup, err := adapter.StartSupervisor(actx, up, emu, adapterCfg, out)
	if err != nil {
		return fmt.Errorf("starting the adapter: %w", err)
	}
	defer func() { _ = sup.Close() }()
	ad := sup.Adapter()
	view.running(sup, false)

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
		mux.Handle("/upstream/sql", sqlHandler(up, cfg.Token))
	}
	mux.Handle("/admin/restart-adapter", restartHandler(restarts, cfg.Token))
	var pause sync.Mutex // held by a workload step, and by a consistency check
	mux.Handle("/admin/check", checkHandler(up, emu, s.tables, &pause, cfg.Token, !s.demo))
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
				// The supervisor restarted it for a table-set change: its
				// counters start from zero.
				ad = cur
				last = minicdc.Stats{}
			}
			st := ad.RT.Stats()
			fmt.Fprintln(out, statusLine(ctx, up, emu, ad, last, st, now.Sub(lastAt)))
			for _, p := range progressLines(ctx, board, now) {
				fmt.Fprintln(out, "sfemu: "+p)
			}
			last, lastAt = st, now
		}
	}
}

// stateWords end the running line: "state=new", or "state=resumed" with
// what the embedded upstream restored (the adapter's resume ts and epoch
// are on the line already).
func stateWords(restored *fakeupstream.RestoreStats, a *adapter.Adapter) string {
	switch {
	case restored != nil && restored.Records > 0:
		return fmt.Sprintf("state=resumed upstream_records=%d upstream_bytes=%d upstream_torn_bytes=%d tso_above=%d",
			restored.Records, restored.Size, restored.TornBytes, restored.TSOLimit)
	case restored == nil && len(a.Resume.Stored) > 0:
		return "state=resumed"
	default:
		return "state=new"
	}
}

func refNames(tables []adapter.TableRef) string {
	var names []string
	for _, t := range tables {
		names = append(names, t.String())
	}
	return strings.Join(names, ",")
}

func collectionNames(tables []adapter.TableRef) string {
	var names []string
	for _, t := range tables {
		names = append(names, t.CollectionName())
	}
	return strings.Join(names, ",")
}

// statusLine: rows/s since the last line, rows buffered in the reorder
// buffers, DDLs so far, the last checkpoint, and per collection how far
// safe_ts trails the upstream's current ts.
func statusLine(ctx context.Context, up *adapter.Upstream, emu *emulator.Emulator, a *adapter.Adapter, prev, cur minicdc.Stats, d time.Duration) string {
	rate := float64(cur.RowsDelivered-prev.RowsDelivered) / d.Seconds()
	var b strings.Builder
	buffered := 0
	for _, ps := range a.Bridge.Stats() {
		buffered += ps.UnsealedRows + ps.SealedRows
	}
	fmt.Fprintf(&b, "sfemu: rows/s=%.0f rows=%d buffered=%d ddls=%d checkpoint_ts=%d", rate, cur.RowsDelivered, buffered, cur.DDLsDelivered, cur.LastCheckpointTs)
	now, err := up.CurrentTs(ctx)
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

// checkHandler serves GET /admin/check: it takes the upstream's current
// ts, waits until every collection's safe_ts reaches it, and compares the
// collections with the tables read by snapshot at that ts through the
// adapter's own snapshot reader (verify.CheckNow; over gRPC in
// the embedded and real-cluster modes). The demo workload pauses
// meanwhile; writes sent through /upstream/sql during the check can show
// up as differences. Against a real cluster (retry) the tables are not
// paused: changes committed after the check's ts show up as differences,
// so a check that finds some is repeated at a fresh ts (up to 3 times)
// and reports the last one's.
func checkHandler(up *adapter.Upstream, emu *emulator.Emulator, tables []adapter.TableRef, pause *sync.Mutex, token string, retry bool) http.Handler {
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
		attempts := 1
		if retry {
			attempts = 3
		}
		var res checkResult
		for i := 0; i < attempts; i++ {
			res = checkOnce(ctx, up, emu, tables)
			if res.OK || res.Err != "" {
				break
			}
		}
		if res.Err != "" {
			w.WriteHeader(http.StatusInternalServerError)
		}
		_ = json.NewEncoder(w).Encode(res)
	})
}

func checkOnce(ctx context.Context, up *adapter.Upstream, emu *emulator.Emulator, tables []adapter.TableRef) checkResult {
	ts, diffs, err := verify.CheckNow(ctx, up.Clock(), up.Snapshot(), emu, tables, 30*time.Second)
	res := checkResult{Ts: ts, OK: err == nil && len(diffs) == 0, Diffs: []string{}}
	for _, d := range diffs {
		res.Diffs = append(res.Diffs, d.String())
	}
	if err != nil {
		res.Err = err.Error()
	}
	return res
}
