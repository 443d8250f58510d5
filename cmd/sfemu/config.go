package main

// The configuration of `sfemu run`: its fields, defaults, the config file
// and the flags given on the command line over it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/tablefilter"
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
	InsecureListen bool          `json:"insecure_listen"`
	MySQLUser      string        `json:"mysql_user"`
	MySQLPassword  string        `json:"mysql_password"`
	CA             string        `json:"ca"`
	Cert           string        `json:"cert"`
	Key            string        `json:"key"`
	Fresh          bool          `json:"fresh"`
	MySQL          string        `json:"mysql"`
	InProcess      bool          `json:"in_process"`
	PDTimeout      time.Duration `json:"pd_timeout"`
	Pprof          string        `json:"pprof"`
	MemoryQuota    string        `json:"memory_quota"`
	SpillQuota     string        `json:"spill_quota"`
	Snapshot       string        `json:"snapshot"`
	SnapshotConc   int           `json:"snapshot_concurrency"`
	VectorMemory   string        `json:"vector_memory_budget"`
}

// vectorBudget parses --vector-memory-budget (VEC-Q1): the memory of all
// vector indexes together, past which an index spills to
// <data-dir>/emulator/vector-spill; 0 is refused (use a size).
func (c runConfig) vectorBudget() (int64, error) {
	n, err := parseSize("vector-memory-budget", c.VectorMemory)
	if err == nil && n == 0 {
		err = fmt.Errorf("--vector-memory-budget must be > 0 (got %q): it bounds the vector indexes' memory before they spill to disk", c.VectorMemory)
	}
	return n, err
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
		MemoryQuota:    "512MiB",
		Snapshot:       "auto",
		SnapshotConc:   4,
		VectorMemory:   "1GiB",
	}
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
	set("insecure-listen", func() { merged.InsecureListen = cfg.InsecureListen })
	set("mysql-user", func() { merged.MySQLUser = cfg.MySQLUser })
	set("mysql-password", func() { merged.MySQLPassword = cfg.MySQLPassword })
	set("ca", func() { merged.CA = cfg.CA })
	set("cert", func() { merged.Cert = cfg.Cert })
	set("key", func() { merged.Key = cfg.Key })
	set("fresh", func() { merged.Fresh = cfg.Fresh })
	set("mysql", func() { merged.MySQL = cfg.MySQL })
	set("in-process", func() { merged.InProcess = cfg.InProcess })
	set("pd-timeout", func() { merged.PDTimeout = cfg.PDTimeout })
	set("pprof", func() { merged.Pprof = cfg.Pprof })
	set("snapshot", func() { merged.Snapshot = cfg.Snapshot })
	set("snapshot-concurrency", func() { merged.SnapshotConc = cfg.SnapshotConc })
	*cfg = merged
	return nil
}

// snapshotConfig is the adapter's initial snapshot configuration
// (specs/sfemu-run.md SN1, SN4): --snapshot and --snapshot-concurrency.
func (c runConfig) snapshotConfig() (adapter.SnapshotConfig, error) {
	mode, err := adapter.ParseSnapshotMode(c.Snapshot)
	if err != nil {
		return adapter.SnapshotConfig{}, err
	}
	if c.SnapshotConc < 1 {
		return adapter.SnapshotConfig{}, fmt.Errorf("--snapshot-concurrency %d: want at least 1", c.SnapshotConc)
	}
	return adapter.SnapshotConfig{Mode: mode, Concurrency: c.SnapshotConc}, nil
}

// parseTables parses --tables: a plain list db.t1,db.t2 (any characters
// in the names, as before), or table filter rules (shop.*, !shop.audit,
// specs/tableset.md TF1). A list returns its tables; rules with a pattern
// return the filter, resolved when the upstream is connected (TF8).
func parseTables(s string) ([]adapter.TableRef, *tablefilter.Filter, error) {
	if strings.ContainsAny(s, "*?[]!/\\\"`") {
		f, err := tablefilter.Parse(s)
		if err != nil {
			return nil, nil, fmt.Errorf("--tables: %w", err)
		}
		if names, ok := f.Literal(); ok {
			out := make([]adapter.TableRef, len(names))
			for i, n := range names {
				out[i] = adapter.TableRef{DB: n[0], Table: n[1]}
			}
			return out, nil, nil
		}
		return nil, f, nil
	}
	var out []adapter.TableRef
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		db, table, ok := strings.Cut(part, ".")
		if !ok || db == "" || table == "" || strings.Contains(table, ".") {
			return nil, nil, fmt.Errorf("--tables: %q is not db.table", part)
		}
		if seen[strings.ToLower(part)] {
			return nil, nil, fmt.Errorf("--tables: %q is listed twice", part)
		}
		seen[strings.ToLower(part)] = true
		out = append(out, adapter.TableRef{DB: db, Table: table})
	}
	if len(out) == 0 {
		return nil, nil, errors.New("--pd needs --tables db.t1[,db.t2...]: the tables to mirror")
	}
	return out, nil, nil
}
