package adapter

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/grpcapi"
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/normalize/grpcsink"
	"github.com/searchfabric/sfemu/verify"
)

// BenchmarkRS_BigTransactionApart is BenchmarkRS_BigTransaction with the
// upstream in its own process, so this process's memory and CPU are the
// adapter's (and, by default, the emulator's): sfemu-upstream is built
// into a temp dir and started on loopback, the b.N-row transaction is
// written through its MySQL front (BEGIN, INSERTs of 1,000 rows, small
// transactions on another connection, then COMMIT, which the timer
// measures up to safe_ts), and the adapter reads it over PD and the
// EventFeed as from a real cluster.
//
// SFEMU_BIGTXN_BENCH_EMULATOR=process moves the emulator out too: this
// test binary, started again with SFEMU_BENCH_EMULATOR_SERVE, serves it
// over gRPC and the bridge writes to it through normalize/grpcsink (the
// canonical batches, not the in-process positional ones: the CPU figures
// of that mode are not comparable). Then peak-RSS-MiB is the adapter
// alone.
//
// Reported beside the in-process benchmark's figures: upstream-cpu-µs/row
// (the upstream process's CPU in the timed section, /proc), the upstream's
// and the emulator process's peak RSS, and emulator-retained-MiB: the live
// heap this process kept after the transaction (a GC, minus the one
// before), which with the in-process emulator is its copy of the rows
// (the adapter gives back everything it held once safe_ts passed).
func BenchmarkRS_BigTransactionApart(b *testing.B) {
	quota := benchQuota(b)
	ctx := context.Background()
	dir := b.TempDir()
	up := startUpstreamProcess(b, dir)
	db, err := sql.Open("mysql", up.dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	for _, q := range []string{
		"CREATE DATABASE shop",
		"CREATE TABLE shop.bulk (id BIGINT PRIMARY KEY, v INT, note VARCHAR(32), body TEXT)",
		"CREATE TABLE shop.events (id BIGINT PRIMARY KEY, product_id BIGINT, kind VARCHAR(16)) PARTITION BY HASH (id) PARTITIONS 4",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	aup, err := ConnectUpstream(ctx, []string{up.pd})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { aup.Close() })
	emu, err := emulator.Open(filepath.Join(dir, "emulator"), emulator.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { emu.Close() })
	mem, err := NewMemory(quota, -1, dir)
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{DataDir: dir, Tables: bulkTables, Memory: mem}
	safe := func(ts uint64) error { return verify.WaitSafe(ctx, emu, bulkTables, ts, 30*time.Minute) }
	var emuPid int
	// RS11: the soft memory limit, as the binary sets it (GOMEMLIMIT=off
	// measures without it): the emulator in process counts as others.
	others := UnchargedLive(mem.Quota)
	if os.Getenv("SFEMU_BIGTXN_BENCH_EMULATOR") == "process" {
		var remote *grpcsink.Sink
		remote, emuPid = startEmulatorProcess(b, filepath.Join(dir, "remote-emulator"))
		cfg.WrapSink = func(normalize.Sink) normalize.Sink { return remote }
		safe = func(ts uint64) error { return waitSafeRemote(ctx, remote, ts, 30*time.Minute) }
		others = nil
	}
	gcLimit := mem.LimitGC(others)
	b.Cleanup(gcLimit.Stop)
	a, err := Start(ctx, aup, emu, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Close() })

	big, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer big.Close()
	exec := func(c interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}, q string) {
		if _, err := c.ExecContext(ctx, q); err != nil {
			b.Fatalf("%.80s: %v", q, err)
		}
	}
	exec(big, "BEGIN")
	var q strings.Builder
	for from := int64(1); from <= int64(b.N); from += 1000 {
		q.Reset()
		q.WriteString("INSERT INTO shop.bulk VALUES ")
		for i := from; i < from+1000 && i <= int64(b.N); i++ {
			if i > from {
				q.WriteByte(',')
			}
			fmt.Fprintf(&q, "(%d,%d,'n%d','abcdefgh')", i, i, i)
		}
		exec(big, q.String())
	}
	// Small transactions commit between the big one's start and commit.
	for k := int64(0); k < 5; k++ {
		exec(db, fmt.Sprintf("INSERT INTO shop.bulk VALUES (%d, 1, 'small', 'x')", -1-k))
		exec(db, fmt.Sprintf("INSERT INTO shop.events VALUES (%d, %d, 'view')", 1+k, k))
	}
	runtime.GC()
	baseHeap, baseRSS := heapObjects(), currentRSS()
	resetPeakRSS()
	peak := watchHeap()
	upPid := strconv.Itoa(up.cmd.Process.Pid)
	b.ResetTimer()
	start, cpu0, upCPU0, gc0 := time.Now(), cpuSeconds(), procCPUSeconds(upPid), gcCPUSeconds()
	exec(big, "COMMIT")
	final, err := aup.CurrentTs(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := safe(final); err != nil {
		b.Fatalf("%v (runtime: %v)", err, a.RT.Err())
	}
	wall, cpu, upCPU, gcCPU := time.Since(start), cpuSeconds()-cpu0, procCPUSeconds(upPid)-upCPU0, gcCPUSeconds()-gc0
	b.StopTimer()
	peakHeap, hwm := peak(), peakRSS()
	runtime.GC()
	retained := int64(heapObjects()) - int64(baseHeap)
	if p := os.Getenv("SFEMU_BIGTXN_END_PROFILE"); p != "" {
		writeHeapProfile(p) // what stays after the transaction
	}
	perRow := func(s float64) float64 { return s * 1e6 / float64(b.N) }
	var reorderRuns uint64
	for _, st := range a.Bridge.Stats() {
		reorderRuns += st.SpillRuns
	}
	_, mruns := a.MatcherSpill()
	b.ReportMetric(float64(b.N)/wall.Seconds(), "rows/s")
	b.ReportMetric(perRow(cpu), "pipeline-cpu-µs/row")
	b.ReportMetric(perRow(upCPU), "upstream-cpu-µs/row")
	b.ReportMetric(perRow(gcCPU), "gc-cpu-µs/row")
	b.ReportMetric(mib(gcLimit.Limit()), "gc-limit-MiB")
	b.ReportMetric(mib(int64(peakHeap)), "peak-heap-MiB")
	b.ReportMetric(mib(int64(peakHeap)-int64(baseHeap)), "heap-growth-MiB")
	b.ReportMetric(mib(hwm), "peak-RSS-MiB")
	b.ReportMetric(mib(hwm-baseRSS), "RSS-growth-MiB")
	b.ReportMetric(mib(retained), "emulator-retained-MiB")
	b.ReportMetric(mib(mem.Quota.Peak()), "quota-peak-MiB")
	b.ReportMetric(mib(procStatus(upPid, "VmHWM:")), "upstream-peak-RSS-MiB")
	if emuPid != 0 {
		b.ReportMetric(mib(procStatus(strconv.Itoa(emuPid), "VmHWM:")), "emulator-peak-RSS-MiB")
	}
	b.ReportMetric(float64(reorderRuns), "reorder-runs")
	b.ReportMetric(float64(mruns), "matcher-runs")
}

type upstreamProcess struct {
	cmd     *exec.Cmd
	pd, dsn string
}

var upstreamEnvLine = regexp.MustCompile(`SFEMU_TIDB_PD=(\S+) SFEMU_TIDB_DSN='([^']+)'`)

// startUpstreamProcess builds sfemu-upstream into dir and starts it on
// loopback with a lock TTL long enough for a bulk load (the fake sends no
// TTL heartbeats); it is killed at cleanup.
func startUpstreamProcess(b *testing.B, dir string) *upstreamProcess {
	bin := filepath.Join(dir, "sfemu-upstream")
	build := exec.Command("go", "build", "-o", bin, "github.com/searchfabric/sfemu/fakeupstream/mysqlfront/cmd/sfemu-upstream")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build sfemu-upstream: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-lock-ttl", "30m")
	cmd.Stderr = os.Stderr
	line := startAndReadLine(b, cmd)
	m := upstreamEnvLine.FindStringSubmatch(line)
	if m == nil {
		b.Fatalf("sfemu-upstream printed %q, want its environment line", line)
	}
	return &upstreamProcess{cmd: cmd, pd: m[1], dsn: m[2]}
}

// startAndReadLine starts cmd, registers its kill at cleanup and returns
// the first line it prints.
func startAndReadLine(b *testing.B, cmd *exec.Cmd) string {
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	if err != nil {
		b.Fatalf("%s: %v", cmd.Path, err)
	}
	go func() { _, _ = io.Copy(io.Discard, r) }()
	return strings.TrimSpace(line)
}

// emulatorServeEnv makes this test binary an emulator server (see init).
const emulatorServeEnv = "SFEMU_BENCH_EMULATOR_SERVE"

// startEmulatorProcess runs this test binary again as an emulator server
// over dataDir and returns a sink writing to it and its pid.
func startEmulatorProcess(b *testing.B, dataDir string) (*grpcsink.Sink, int) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), emulatorServeEnv+"="+dataDir)
	cmd.Stderr = os.Stderr
	addr := startAndReadLine(b, cmd)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(grpcapi.DefaultMaxRecvBytes)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	return grpcsink.New(cc), cmd.Process.Pid
}

// init serves an emulator over gRPC on loopback instead of running tests
// when emulatorServeEnv names its data dir: it prints the address and
// serves until killed.
func init() {
	dir := os.Getenv(emulatorServeEnv)
	if dir == "" {
		return
	}
	emu, err := emulator.Open(dir, emulator.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	err = grpcapi.NewServer(emu, grpcapi.Options{}).Serve(ln)
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// waitSafeRemote is verify.WaitSafe over the emulator's gRPC API.
func waitSafeRemote(ctx context.Context, s *grpcsink.Sink, ts uint64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, ref := range bulkTables {
		name := ref.CollectionName()
		for {
			st, err := s.Control.GetCollection(ctx, &apiv1.GetCollectionRequest{Name: name})
			if err == nil && st.GetSafeTs() >= ts {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("collection %q safe_ts %d did not reach %d within %v (last error: %v)", name, st.GetSafeTs(), ts, timeout, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// gcCPUSeconds is the CPU the Go runtime estimates its GC spent so far
// (runtime/metrics: mark assists, dedicated and idle mark workers, pauses).
func gcCPUSeconds() float64 {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	return s[0].Value.Float64()
}

// procCPUSeconds is the user + system CPU of process pid so far
// (/proc/<pid>/stat; 0 where unknown).
func procCPUSeconds(pid string) float64 {
	raw, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces): state is
	// the first, utime and stime the 12th and 13th.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ is 100 on Linux
}
