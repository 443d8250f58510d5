package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/adapter/datadir"
	"github.com/searchfabric/sfemu/emulator/storage"
	"github.com/searchfabric/sfemu/fakeupstream/kvlog"
	"github.com/searchfabric/sfemu/snapshot"
	"github.com/searchfabric/sfemu/upstream/schemastore"
)

// `sfemu verify --data-dir D` checks a stopped data dir offline (SR20):
// each store with its own checker, read-only, printing one line per store
// and one per damaged record; the exit status is non-zero when anything is
// damaged.

func newVerifyCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "check a stopped sfemu data dir offline and list what is damaged",
		Long: `verify reads every store of a stopped "sfemu run" data dir without changing
it: the emulator's collections (emulator/emulator.db: page structure, and
every document, tombstone, stream state, catalog and idempotency record
against its checksum), the schema store (schemastore/*.db), the embedded
upstream's log (upstream/upstream.log: every record's checksum) and the
upstream marker (upstream.json); it lists leftover spill files, which hold
nothing acknowledged. It prints one line per store and one per damaged
record, and exits non-zero when anything is damaged. A data dir in use by
a running sfemu is refused: stop it first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runVerify(cmd.OutOrStdout(), dir)
		},
	}
	cmd.Flags().StringVar(&dir, "data-dir", "", "the data dir to check (required)")
	return cmd
}

// errDamagedDir is returned (wrapped) when verify found damage.
var errDamagedDir = errors.New("damaged")

func runVerify(out io.Writer, dir string) error {
	if dir == "" {
		return errors.New("verify: --data-dir is required")
	}
	if st, err := os.Stat(dir); err != nil {
		return fmt.Errorf("verify: %w", err)
	} else if !st.IsDir() {
		return fmt.Errorf("verify: %s is not a directory", dir)
	}
	unlock, err := shareLock(dir)
	if err != nil {
		return err
	}
	defer unlock()

	v := &verifier{out: out, dir: dir}
	fmt.Fprintf(out, "data dir %s\n", dir)
	v.emulator()
	v.schemaStore()
	v.upstreamLog()
	v.marker()
	v.snapshotState()
	v.spill()
	v.unknown()
	if v.checked == 0 {
		return fmt.Errorf("verify: %s holds no sfemu state (no %s/, %s/, %s/ or %s)", dir, datadir.Emulator, datadir.SchemaStore, datadir.Upstream, datadir.Marker)
	}
	if v.damaged > 0 {
		return fmt.Errorf("verify: data dir %s is %w: %d problem(s) listed above", dir, errDamagedDir, v.damaged)
	}
	fmt.Fprintln(out, "no damage found")
	return nil
}

// shareLock takes a shared lock on the data dir's lock file, if there is
// one: a running sfemu holds it exclusively (SR5), and a store it is
// writing cannot be checked. The lock is not created when missing, so
// verify writes nothing.
func shareLock(dir string) (func(), error) {
	p := filepath.Join(dir, datadir.LockFile)
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return func() {}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("verify: data dir %s is in use by a running sfemu (%s is locked): stop it first", dir, p)
		}
		return nil, fmt.Errorf("verify: lock %s: %w", p, err)
	}
	return func() { _ = f.Close() }, nil
}

type verifier struct {
	out     io.Writer
	dir     string
	checked int // stores found
	damaged int // problems found
}

func (v *verifier) ok(name, format string, args ...any) {
	v.checked++
	fmt.Fprintf(v.out, "  %-40s ok: %s\n", name, fmt.Sprintf(format, args...))
}

func (v *verifier) bad(name string, problems ...string) {
	v.checked++
	v.damaged += len(problems)
	fmt.Fprintf(v.out, "  %-40s DAMAGED\n", name)
	for _, p := range problems {
		fmt.Fprintf(v.out, "    %s\n", p)
	}
}

// missing reports whether err is a store that is not there (skipped).
func missing(err error) bool { return errors.Is(err, os.ErrNotExist) }

func (v *verifier) emulator() {
	name := filepath.Join(datadir.Emulator, storage.FileName)
	rep, err := storage.Verify(filepath.Join(v.dir, datadir.Emulator))
	switch {
	case missing(err):
		return
	case err != nil:
		v.bad(name, err.Error())
		return
	case !rep.OK():
		p := rep.Damaged
		if rep.Truncated > 0 {
			p = append(p, fmt.Sprintf("... and %d more", rep.Truncated))
		}
		v.damaged += rep.Truncated
		v.bad(name, p...)
		return
	}
	msg := fmt.Sprintf("format %s, %d collections, %d partitions, %d documents and tombstones, %d idempotency records",
		rep.Format, rep.Collections, rep.Partitions, rep.Documents, rep.Idempotency)
	if rep.Note != "" {
		msg += "; " + rep.Note
	}
	v.ok(name, "%s", msg)
}

func (v *verifier) schemaStore() {
	files, _ := filepath.Glob(filepath.Join(v.dir, datadir.SchemaStore, "*.db"))
	sort.Strings(files)
	for _, f := range files {
		name := filepath.Join(datadir.SchemaStore, filepath.Base(f))
		if err := schemastore.VerifyFile(f); err != nil {
			v.bad(name, err.Error())
			continue
		}
		v.ok(name, "checksums, record counts and references")
	}
}

func (v *verifier) upstreamLog() {
	name := filepath.Join(datadir.Upstream, kvlog.FileName)
	st, err := kvlog.Verify(filepath.Join(v.dir, datadir.Upstream))
	switch {
	case missing(err):
		return
	case err != nil:
		v.bad(name, err.Error())
		return
	}
	msg := fmt.Sprintf("%d records", st.Records)
	if st.TornBytes > 0 {
		msg += fmt.Sprintf("; a torn tail of %d bytes (never acknowledged; the next start drops it)", st.TornBytes)
	}
	v.ok(name, "%s", msg)
}

func (v *verifier) marker() {
	raw, err := os.ReadFile(filepath.Join(v.dir, datadir.Marker))
	if missing(err) {
		return
	}
	var o datadir.Owner
	if err == nil {
		err = json.Unmarshal(raw, &o)
	}
	if err == nil && o.Mode == "" {
		err = errors.New("no upstream mode recorded")
	}
	if err != nil {
		v.bad(datadir.Marker, err.Error())
		return
	}
	if o.ClusterID != 0 {
		v.ok(datadir.Marker, "%s upstream, cluster id %d", o.Mode, o.ClusterID)
	} else {
		v.ok(datadir.Marker, "%s upstream", o.Mode)
	}
}

// snapshotState checks the initial snapshot's saved progress (SN6): it
// must decode and pass the state's own checks (ranges ordered, resume
// keys inside their range), as the next start would require.
func (v *verifier) snapshotState() {
	st, err := snapshot.Load(filepath.Join(v.dir, snapshot.FileName))
	switch {
	case err != nil:
		v.bad(snapshot.FileName, err.Error())
	case st != nil:
		done := 0
		for _, t := range st.Tables {
			if t.Finished {
				done++
			}
		}
		v.ok(snapshot.FileName, "snapshot at ts %d, %d of %d tables finished", st.Ts, done, len(st.Tables))
	}
}

// known are the data dir's entries verify checks or lists.
var known = map[string]bool{datadir.Emulator: true, datadir.SchemaStore: true, datadir.Upstream: true, datadir.Marker: true,
	snapshot.FileName: true, datadir.LockFile: true, filepath.Base(adapter.SpillDir("")): true}

// unknown lists the entries of the data dir that no check covers, so
// that nothing in it goes unmentioned.
func (v *verifier) unknown() {
	ents, _ := os.ReadDir(v.dir)
	for _, e := range ents {
		if !known[e.Name()] {
			fmt.Fprintf(v.out, "  %-40s not checked: not an sfemu store\n", e.Name())
		}
	}
}

// spill lists leftover run files: they hold rows that were never
// acknowledged, and the next start removes them (RS4), so their content
// cannot be damage to the data dir's state.
func (v *verifier) spill() {
	dir := adapter.SpillDir(v.dir)
	files, _ := filepath.Glob(filepath.Join(dir, "*.run"))
	if len(files) == 0 {
		return
	}
	var size int64
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			size += st.Size()
		}
	}
	fmt.Fprintf(v.out, "  %-40s %d leftover run files, %d bytes (never acknowledged; the next start removes them)\n", "spill/", len(files), size)
}
