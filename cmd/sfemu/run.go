package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pingcap/log"
	"github.com/spf13/cobra"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/adapter/datadir"
	"github.com/searchfabric/sfemu/emulator/httpapi"
	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/demo"
	"github.com/searchfabric/sfemu/fakeupstream/kvlog"
	"github.com/searchfabric/sfemu/fakeupstream/mysqlfront"
	"github.com/searchfabric/sfemu/tablefilter"
	"github.com/searchfabric/sfemu/upstream/pd"
)

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
is refused. On a fresh data dir the adapter first reads every table at one
snapshot ts S (--snapshot=auto, the default: an initial load with progress
lines; a stop resumes it) and then streams the changes committed after S;
--snapshot=never (or --start-ts) delivers only changes after the start ts.
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
	f.StringVar(&configFile, "config", "", "JSON config file (keys: data_dir, http, grpc, mysql, pd, tables, start_ts, seed, rate, ddl_every, status_interval, token, insecure_listen, mysql_user, mysql_password, ca, cert, key, fresh, in_process, pd_timeout, pprof, memory_quota, spill_quota, snapshot, snapshot_concurrency, vector_memory_budget); flags override it")
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory for the embedded upstream (upstream/), the emulator's collections, the schema store, upstream.json (which upstream the state belongs to) and client.log; a rerun on it resumes")
	f.StringVar(&cfg.HTTP, "http", cfg.HTTP, "HTTP API listen address (an empty host binds 127.0.0.1)")
	f.StringVar(&cfg.GRPC, "grpc", cfg.GRPC, "gRPC API listen address (an empty host binds 127.0.0.1); empty disables gRPC")
	f.StringVar(&cfg.MySQL, "mysql", cfg.MySQL, "embedded mode: MySQL-protocol front of the embedded upstream (an empty host binds 127.0.0.1); empty disables it")
	f.StringVar(&cfg.PD, "pd", cfg.PD, "real-cluster mode: PD addresses, host:port[,host:port...] (requires --tables)")
	f.StringVar(&cfg.Tables, "tables", cfg.Tables, "real-cluster mode: tables to mirror, db.t1,db.t2 or TiCDC-style filter rules such as 'shop.*,!shop.audit' (collection names db.table)")
	f.Uint64Var(&cfg.StartTs, "start-ts", cfg.StartTs, "real-cluster mode: ts to start from when the data dir has no stored progress (0 = now); must be at or above the GC safe point")
	f.DurationVar(&cfg.PDTimeout, "pd-timeout", cfg.PDTimeout, "real-cluster mode: how long to try reaching PD before giving up")
	f.BoolVar(&cfg.InProcess, "in-process", cfg.InProcess, "embedded mode: read the embedded cluster in process instead of over its gRPC servers (no PD client, client-go or log puller)")
	f.Int64Var(&cfg.Seed, "seed", cfg.Seed, "embedded mode: seed of the embedded cluster and the demo workload")
	f.IntVar(&cfg.Rate, "rate", cfg.Rate, "embedded mode: demo workload transactions per second (0 = no workload)")
	f.IntVar(&cfg.DDLEvery, "ddl-every", cfg.DDLEvery, "embedded mode: one demo DDL every N transactions (0 = none)")
	f.DurationVar(&cfg.StatusInterval, "status-interval", cfg.StatusInterval, "time between status lines")
	f.StringVar(&cfg.Token, "token", cfg.Token, "bearer token the HTTP and gRPC APIs require (empty = none; required when --http or --grpc is not a loopback address)")
	f.StringVar(&cfg.MySQLUser, "mysql-user", cfg.MySQLUser, "embedded mode: the MySQL front's user, with --mysql-password (default root)")
	f.StringVar(&cfg.MySQLPassword, "mysql-password", cfg.MySQLPassword, "embedded mode: the MySQL front requires this password (mysql_native_password); empty = root without a password")
	f.StringVar(&cfg.CA, "ca", cfg.CA, "real-cluster mode: CA certificate (PEM) for TLS to PD and TiKV, as TiCDC's --ca")
	f.StringVar(&cfg.Cert, "cert", cfg.Cert, "real-cluster mode: client certificate (PEM) for TLS to PD and TiKV (with --key)")
	f.StringVar(&cfg.Key, "key", cfg.Key, "real-cluster mode: client private key (PEM) for TLS to PD and TiKV (with --cert)")
	f.BoolVar(&cfg.InsecureListen, "insecure-listen", cfg.InsecureListen, "allow --http/--grpc on a non-loopback address without --token (anyone who can reach the port can call the admin endpoints)")
	f.StringVar(&cfg.Pprof, "pprof", cfg.Pprof, "serve Go profiles on the HTTP listener under /debug/pprof/: auto (only when it is bound to loopback), on, off")
	f.StringVar(&cfg.MemoryQuota, "memory-quota", cfg.MemoryQuota, "memory the adapter may hold for rows not yet applied (all partitions together), e.g. 512MiB; past it, transactions spill to <data-dir>/spill")
	f.StringVar(&cfg.SpillQuota, "spill-quota", cfg.SpillQuota, "disk the adapter may use for spill files, e.g. 20GiB (empty = the free space of <data-dir>/spill minus 1 GiB); past memory and spill quota the adapter stops with an overflow error")
	f.StringVar(&cfg.Snapshot, "snapshot", cfg.Snapshot, "initial snapshot: auto (read the tables at one ts before streaming when the data dir holds nothing of them yet, and finish an interrupted snapshot), never (stream from the start ts only), always (drop the collections and read the tables again at every start)")
	f.StringVar(&cfg.VectorMemory, "vector-memory-budget", cfg.VectorMemory, "memory all vector indexes may use together (both generations during a rebuild), e.g. 1GiB; past it an index moves its vectors to <data-dir>/emulator/vector-spill and answers by exact scan")
	f.IntVar(&cfg.SnapshotConc, "snapshot-concurrency", cfg.SnapshotConc, "key ranges (regions) the initial snapshot reads in parallel")
	f.BoolVar(&cfg.Fresh, "fresh", cfg.Fresh, "embedded mode: remove the data dir's previous state (upstream, collections, schema store) and start over; without it a run resumes where the previous one stopped")
	return cmd
}

var demoTables = []adapter.TableRef{{DB: demo.Database, Table: "products"}, {DB: demo.Database, Table: "events"}}

// session is what the serve loop runs: the upstream, the mirrored tables
// and whether the demo (workload, /upstream/sql) belongs to it.
type session struct {
	up     *adapter.Upstream
	tables []adapter.TableRef
	// filter is --tables when it has patterns: the set follows it live.
	filter *tablefilter.Filter
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
	if err := checkListen(cfg); err != nil {
		return err
	}
	if err := checkSecurity(cfg); err != nil {
		return err
	}
	if _, _, err := cfg.quotas(); err != nil {
		return err
	}
	if _, err := cfg.snapshotConfig(); err != nil {
		return err
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
	defer quietClientLog()
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
		ms, err := mysqlfront.StartConfig(up.SQL, mysqlfront.Config{Addr: mysqlAddr, User: cfg.MySQLUser, Password: cfg.MySQLPassword})
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
	tables, filter, err := parseTables(cfg.Tables)
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
	up, err := adapter.ConnectUpstreamSecure(cctx, strings.Split(cfg.PD, ","), cfg.security())
	cancel()
	if err != nil {
		return fmt.Errorf("--pd %s: %w", cfg.PD, err)
	}
	defer up.Close()
	if err := datadir.Bind(cfg.DataDir, datadir.Owner{Mode: "real", ClusterID: up.PD.PD.ClusterID()}); err != nil {
		return err
	}
	if filter != nil {
		if tables, _, err = adapter.ResolveFilter(ctx, up, filter, cfg.StartTs); err != nil {
			return fmt.Errorf("--tables: %w", err)
		}
	}
	return serve(ctx, cfg, out, session{up: up, tables: tables, filter: filter, gc: datadir.GCConfig(cfg.DataDir)})
}

// clientLogFile receives the PD client's and client-go's own log lines
// (level warn), so they stay out of the status output.
const clientLogFile = "client.log"

// quietClientLog points the PD client's and client-go's global logger away
// from the data dir when a run ends: their goroutines can outlive the run
// by a moment, and a late line must not recreate client.log in a data dir
// that is being removed (seen as a test's TempDir cleanup failing with
// "directory not empty").
func quietClientLog() {
	lg, props, err := log.InitLogger(&log.Config{Level: "fatal"})
	if err == nil {
		log.ReplaceGlobals(lg, props)
	}
}

func initClientLog(dataDir string) {
	lg, props, err := log.InitLogger(&log.Config{Level: "warn", File: log.FileLogConfig{Filename: filepath.Join(dataDir, clientLogFile), MaxSize: 64, MaxBackups: 2}})
	if err == nil {
		log.ReplaceGlobals(lg, props)
	}
}
