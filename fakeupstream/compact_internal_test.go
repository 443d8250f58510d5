package fakeupstream

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/searchfabric/sfemu/fakeupstream/kvlog"
)

var compactSeed = flag.Int64("compact-seed", 1, "seed of the compaction crash tests")

func ckey(i int) []byte { return []byte(fmt.Sprintf("t\x80k%05d", i)) }

// compactState renders what a client observes: snapshot reads at each ts
// of tss, the locks, the GC safe point, the regions and the meta values.
func compactState(t testing.TB, c *Cluster, tss []uint64) string {
	t.Helper()
	var b strings.Builder
	// The workload leaves locks on keys 200-203: scan around them (a
	// scan over a lock fails as a whole) and read them one by one.
	ranges := [][2][]byte{{nil, ckey(200)}, {ckey(204), nil}}
	for _, ts := range tss {
		for _, r := range ranges {
			kvs, err := c.Scan(context.Background(), r[0], r[1], ts, 0)
			if err != nil {
				fmt.Fprintf(&b, "@%d: %v\n", ts, err)
				continue
			}
			for _, kv := range kvs {
				fmt.Fprintf(&b, "@%d %q=%q\n", ts, kv.Key, kv.Value)
			}
		}
		for i := 200; i < 204; i++ {
			v, err := c.Get(context.Background(), ckey(i), ts)
			fmt.Fprintf(&b, "@%d %q=%q %v\n", ts, ckey(i), v, err)
		}
	}
	for _, l := range c.ScanLocks(nil, nil, ^uint64(0)) {
		fmt.Fprintf(&b, "lock %q start=%d primary=%q op=%s async=%v min=%d sec=%q val=%q\n",
			l.Key, l.StartTs, l.Primary, l.Op, l.UseAsyncCommit, l.MinCommitTs, l.Secondaries, l.Value)
	}
	sp, _ := c.GCSafePoint(context.Background())
	fmt.Fprintf(&b, "gc %d\n", sp)
	for _, r := range c.Regions() {
		fmt.Fprintf(&b, "region %d [%x,%x) v%d c%d leader %d peers %v\n", r.ID, r.StartKey, r.EndKey, r.Version, r.ConfVer, r.Leader, r.Peers)
	}
	fmt.Fprintf(&b, "meta %q\n", c.Meta("pd/test"))
	return b.String()
}

// compactWorkload fills c with versions, deletes, rollbacks, locks left
// behind, a split and meta values, and returns the timestamps to read at.
func compactWorkload(t testing.TB, c *Cluster, rng *rand.Rand) []uint64 {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var tss []uint64
	for round := 0; round < 4; round++ {
		for i := 0; i < 60; i++ {
			k := ckey(rng.Intn(80))
			var ts uint64
			var err error
			if rng.Intn(5) == 0 {
				ts, err = c.Delete(k)
			} else {
				ts, err = c.Put(k, []byte(fmt.Sprintf("r%d-%d", round, i)))
			}
			must(err)
			tss = append(tss, ts)
		}
		rb := c.Begin()
		rb.Set(ckey(rng.Intn(80)), []byte("never"))
		must(rb.Prewrite())
		must(rb.Rollback())
		txn := c.Begin()
		for i := 0; i < 4; i++ {
			txn.Set(ckey(100+round*4+i), []byte(fmt.Sprintf("2pc%d", round)))
		}
		ts, err := txn.Commit()
		must(err)
		tss = append(tss, ts)
	}
	// GC in the middle of the history.
	c.GC(tss[len(tss)/2])
	_, _, err := c.SplitRaw(ckey(40))
	must(err)
	must(c.SaveMeta("pd/test", []byte("one")))
	must(c.SaveMeta("pd/test", []byte("two")))
	// Locks left behind: a primary committed with its secondary still
	// locked, an async-commit txn prewritten only.
	half := c.Begin()
	half.Set(ckey(200), []byte("half-p"))
	half.Set(ckey(201), []byte("half-s"))
	must(half.Prewrite())
	cts := c.Oracle().Next()
	must(half.CommitKeys(cts, ckey(200)))
	tss = append(tss, cts)
	as := c.Begin()
	as.UseAsyncCommit()
	as.Set(ckey(202), []byte("async-a"))
	as.Set(ckey(203), []byte("async-b"))
	must(as.Prewrite())
	ts, err := c.Put(ckey(204), []byte("last"))
	must(err)
	return append(tss, ts)
}

// image is a copy of the directory as a crash at some step would leave
// it, with the state every reopen must show.
type image struct {
	dir, step, want string
	tss             []uint64
}

// imagingIO copies the directory before every file operation of a
// compaction (a crash just before it) and, for a write, also with half of
// the write done (a torn write).
type imagingIO struct {
	t      *testing.T
	dir    string
	step   int
	want   *string
	tss    *[]uint64
	images []image
	fail   int // step that fails instead (-1: none)
}

var errInjected = errors.New("injected compaction fault")

func (m *imagingIO) snap(what string, torn func(dir string)) {
	to := m.t.TempDir()
	for _, name := range []string{kvlog.FileName, kvlog.TempName} {
		b, err := os.ReadFile(filepath.Join(m.dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			m.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, name), b, 0o644); err != nil {
			m.t.Fatal(err)
		}
	}
	if torn != nil {
		torn(to)
	}
	m.images = append(m.images, image{dir: to, step: fmt.Sprintf("%d %s", m.step, what), want: *m.want, tss: append([]uint64(nil), *m.tss...)})
}

func (m *imagingIO) next(what string, torn func(string)) error {
	if m.fail < 0 {
		m.snap(what, nil)
		if torn != nil {
			m.snap(what+" torn", torn)
		}
	}
	m.step++
	if m.step-1 == m.fail {
		return fmt.Errorf("%w at step %d (%s)", errInjected, m.step-1, what)
	}
	return nil
}

func (m *imagingIO) Create(path string) (*os.File, error) {
	if err := m.next("create", nil); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

func (m *imagingIO) WriteAt(f *os.File, b []byte, off int64) error {
	half := b[:len(b)/2]
	if err := m.next(fmt.Sprintf("write %d bytes at %d", len(b), off), func(dir string) {
		g, err := os.OpenFile(filepath.Join(dir, kvlog.TempName), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			m.t.Fatal(err)
		}
		g.WriteAt(half, off)
		g.Close()
	}); err != nil {
		return err
	}
	_, err := f.WriteAt(b, off)
	return err
}

func (m *imagingIO) Sync(f *os.File) error {
	if err := m.next("sync", nil); err != nil {
		return err
	}
	return f.Sync()
}

func (m *imagingIO) Rename(from, to string) error {
	if err := m.next("rename", nil); err != nil {
		return err
	}
	return os.Rename(from, to)
}

func (m *imagingIO) SyncDir(dir string) error {
	if err := m.next("sync dir", nil); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// compactBase builds the workload's directory once; compactRun works on
// copies of it.
func compactBase(t *testing.T, seed int64) (dir string, tss []uint64) {
	dir = t.TempDir()
	c, err := New(Config{Seed: seed, Dir: dir, Maintain: MaintainConfig{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	tss = compactWorkload(t, c, rand.New(rand.NewSource(seed)))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, tss
}

// compactRun reopens a copy of base, then compacts it in chunks of 16
// keys while, between chunks, acknowledged commits land on keys already
// copied and not yet copied and the GC safe point moves. io sees every
// file operation of the compaction.
func compactRun(t *testing.T, seed int64, base string, baseTss []uint64, io *imagingIO) (c *Cluster, dir string, tss []uint64, want string, err error) {
	dir = t.TempDir()
	b, err := os.ReadFile(filepath.Join(base, kvlog.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, kvlog.FileName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err = New(Config{Seed: seed, Dir: dir, Maintain: MaintainConfig{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(seed))
	tss = append([]uint64(nil), baseTss...)
	want = compactState(t, c, tss)
	io.dir, io.want, io.tss = dir, &want, &tss
	c.log.SetCompactIO(io)
	c.compactChunk = 16
	chunk := 0
	c.compactHook = func() {
		chunk++
		for i := 0; i < 3; i++ {
			ts, err := c.Put(ckey(rng.Intn(199)), []byte(fmt.Sprintf("during%d-%d", chunk, i)))
			if err != nil {
				t.Fatalf("seed %d: commit during compaction: %v", seed, err)
			}
			tss = append(tss, ts)
		}
		// A key above every key copied so far (after the last chunk:
		// above the whole copy), which only the tee can carry.
		ts, err := c.Put(ckey(1000+chunk), []byte("new-high"))
		if err != nil {
			t.Fatalf("seed %d: commit during compaction: %v", seed, err)
		}
		tss = append(tss, ts)
		if chunk%4 == 0 {
			c.GC(tss[len(tss)-5])
		}
		if io.fail < 0 { // the crash images need the state at every step
			want = compactState(t, c, tss)
		}
	}
	_, err = c.Compact()
	c.compactHook = nil
	if io.fail >= 0 {
		want = compactState(t, c, tss)
	}
	return c, dir, tss, want, err
}

// TestDUR11CompactionCrashAtEveryStep: a crash before any file operation
// of a compaction, or in the middle of any of its writes, leaves a
// directory that reopens with every acknowledged commit and the same
// snapshot reads at every ts (below the safe point: the same GC error),
// locks, regions and meta values; the unfinished file is removed. rule:
// DUR-11
func TestDUR11CompactionCrashAtEveryStep(t *testing.T) {
	seed := *compactSeed
	base, baseTss := compactBase(t, seed)
	io := &imagingIO{t: t, fail: -1}
	c, dir, tss, want, err := compactRun(t, seed, base, baseTss, io)
	if err != nil {
		t.Fatalf("seed %d: compact: %v", seed, err)
	}
	// After the compaction the running cluster answers the same and keeps
	// writing to the new file.
	if got := compactState(t, c, tss); got != want {
		t.Fatalf("seed %d: state after compaction:\n%s\nwant:\n%s", seed, got, want)
	}
	ts, err := c.Put(ckey(300), []byte("after"))
	if err != nil {
		t.Fatal(err)
	}
	tss = append(tss, ts)
	want = compactState(t, c, tss)
	io.snap("after", nil)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	io.images = append(io.images, image{dir: dir, step: "closed", want: want, tss: tss})
	t.Logf("seed %d: %d crash images", seed, len(io.images))
	if len(io.images) < 10 {
		t.Fatalf("seed %d: only %d crash images: the compaction wrote too little", seed, len(io.images))
	}
	for _, im := range io.images {
		r, err := New(Config{Seed: seed, Dir: im.dir, Maintain: MaintainConfig{Off: true}})
		if err != nil {
			t.Fatalf("seed %d: reopen after a crash before step %s: %v", seed, im.step, err)
		}
		if got := compactState(t, r, im.tss); got != im.want {
			t.Fatalf("seed %d: after a crash before step %s:\n%s\nwant:\n%s", seed, im.step, got, im.want)
		}
		if _, err := os.Stat(filepath.Join(im.dir, kvlog.TempName)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("seed %d: crash before step %s: the unfinished compaction file is still there (%v)", seed, im.step, err)
		}
		r.Close()
	}
}

// TestDUR11CompactionFailureKeepsOldLog: a compaction whose file
// operation fails at any step returns the error; before the rename the
// old log stays in use (writes go on, a reopen shows everything), after
// it the failed directory sync is the log's sticky error. rule: DUR-11
func TestDUR11CompactionFailureKeepsOldLog(t *testing.T) {
	seed := *compactSeed
	// Count the steps of a clean run first.
	base, baseTss := compactBase(t, seed)
	count := &imagingIO{t: t, fail: 1 << 30}
	c, _, cleanTss, cleanWant, err := compactRun(t, seed, base, baseTss, count)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	t.Logf("seed %d: %d file operations", seed, count.step)
	for step := 0; step < count.step; step++ {
		io := &imagingIO{t: t, fail: step}
		c, dir, tss, want, err := compactRun(t, seed, base, baseTss, io)
		if !errors.Is(err, errInjected) {
			t.Fatalf("seed %d: fault at step %d: compact returned %v", seed, step, err)
		}
		afterRename := step == count.step-1 // the directory sync
		ts, perr := c.Put(ckey(301), []byte("after-failure"))
		if afterRename {
			if perr == nil {
				t.Fatalf("seed %d: the directory sync failed but a commit was acknowledged", seed)
			}
			// Reads fail with the sticky error now; the new log must
			// hold what the clean run (same seed, same commits and
			// timestamps) held.
			tss, want = cleanTss, cleanWant
		} else {
			if perr != nil {
				t.Fatalf("seed %d: fault at step %d: commit after the failed compaction: %v", seed, step, perr)
			}
			tss = append(tss, ts)
			want = compactState(t, c, tss)
		}
		c.Close()
		r, err := New(Config{Seed: seed, Dir: dir, Maintain: MaintainConfig{Off: true}})
		if err != nil {
			t.Fatalf("seed %d: fault at step %d: reopen: %v", seed, step, err)
		}
		if got := compactState(t, r, tss); got != want {
			t.Fatalf("seed %d: fault at step %d: reopened state:\n%s\nwant:\n%s", seed, step, got, want)
		}
		r.Close()
	}
}
