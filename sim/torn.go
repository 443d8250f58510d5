package sim

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"

	"github.com/searchfabric/sfemu/emulator/storage"
)

// The torn-write fault (specs/sim.md SIM18): the process dies while the
// emulator's store commits a write, and the disk keeps only part of what
// was not yet fsynced. bbolt commits by writing the transaction's pages,
// fsyncing, writing its meta page into the slot of the older meta and
// fsyncing again; so a crash leaves either (dropped) the old meta pages
// and any subset of the new pages, one of them torn at a sector, or
// (meta torn) every new page and a meta page written only in part. bbolt
// has no VFS to inject under, so the fault layer builds that file from
// the store's bytes before (s0) and after (s1) the write, while the
// emulator is stopped. The reopened store must open, and hold the state
// before the write or, had the meta page reached the disk whole, after
// it: nothing the write did is half there.

// tornWrite is a write cut by the crash, waiting for the restart.
type tornWrite struct {
	s0, s1        []byte
	stored        map[string]uint64 // checker.stored before the write
	before, after string            // emuState digests
	arg           uint64
	what          string
}

// tearAt runs the armed torn-write fault at write `what`.
func (w *world) tearAt(f *Fault, what string, do func() error) error {
	path := filepath.Join(w.emuDir, storage.FileName)
	t := &tornWrite{arg: f.Arg, what: what}
	var err error
	if t.before, err = w.emuState(); err == nil {
		t.s0, err = readStore(path)
	}
	if err != nil {
		w.chk.fail(InvIntegrity, "reading the store before a torn write: %v", err)
		return err
	}
	t.after = t.before
	t.stored = maps.Clone(w.chk.stored)
	if err := do(); err != nil {
		w.trace("write before the torn crash failed: %v", err)
	} else if t.after, err = w.emuState(); err != nil {
		w.chk.fail(InvIntegrity, "reading the store after a torn write: %v", err)
		return err
	}
	if t.s1, err = readStore(path); err != nil {
		w.chk.fail(InvIntegrity, "reading the store after a torn write: %v", err)
		return err
	}
	w.torn = t
	w.crashed = true
	w.expectFatal = true
	return fmt.Errorf("sim: process crashed at %s (torn write)", what)
}

// tornImage is the file the crash leaves (see above); metaFirst is the
// mutant `meta-first`: the meta page reached the disk whole before the
// pages it points at, some of which are lost.
func tornImage(t *tornWrite, metaFirst bool) ([]byte, string) {
	ps := os.Getpagesize()
	rng := rand.New(rand.NewSource(int64(t.arg >> 1)))
	out := append([]byte(nil), t.s1...)
	old := make([]byte, len(out))
	copy(old, t.s0)
	var metas, pages []int
	for p := 0; (p+1)*ps <= len(out); p++ {
		if !bytes.Equal(out[p*ps:(p+1)*ps], old[p*ps:(p+1)*ps]) {
			if p < 2 {
				metas = append(metas, p)
			} else {
				pages = append(pages, p)
			}
		}
	}
	if len(metas) == 0 && len(pages) == 0 {
		return out, "the write changed nothing on disk"
	}
	revert := func(p, from int) { copy(out[p*ps+from:(p+1)*ps], old[p*ps+from:(p+1)*ps]) }
	dropSome := func() int {
		n := 0
		for _, p := range pages {
			if rng.Intn(2) == 0 {
				revert(p, 0)
				n++
			}
		}
		if len(pages) > 0 {
			p := pages[rng.Intn(len(pages))]
			revert(p, 512*(1+rng.Intn(ps/512-1)))
		}
		return n
	}
	switch {
	case metaFirst:
		n := dropSome()
		if len(pages) > 0 && n == 0 {
			revert(pages[0], 0)
			n = 1
		}
		return out, fmt.Sprintf("meta page written whole, %d of %d new pages lost (mutant)", n, len(pages))
	case len(metas) == 1 && rng.Intn(2) == 0:
		m := metas[0]
		cut := 1 + rng.Intn(metaTxidOff+8+8-1) // inside the meta body and its checksum
		revert(m, cut)
		return out, fmt.Sprintf("every new page written, meta page %d torn after %d bytes", m, cut)
	default:
		for _, m := range metas {
			revert(m, 0)
		}
		n := dropSome()
		return out, fmt.Sprintf("meta pages old, %d of %d new pages dropped, one torn", n, len(pages))
	}
}

// tear writes the crash's file while the emulator is stopped.
func (w *world) tear(t *tornWrite) error {
	img, what := tornImage(t, w.mutant == MutantMetaFirst && w.mut.arm(w))
	t.what += ": " + what
	w.trace("torn write at %s", t.what)
	return writeStore(filepath.Join(w.emuDir, storage.FileName), img, false)
}

// checkTorn: after the restart the store holds the state before the
// write or after it, nothing in between (SIM18).
func (w *world) checkTorn(t *tornWrite) {
	w.chk.count(InvIntegrity)
	got, err := w.emuState()
	switch {
	case err != nil:
		w.chk.fail(InvIntegrity, "the store after a torn write (%s) cannot be read: %v", t.what, err)
	case got != t.before && got != t.after:
		w.chk.fail(InvIntegrity, "the store after a torn write (%s) holds state %s: neither the state before it (%s) nor after it (%s)", t.what, got, t.before, t.after)
	case got == t.before && got != t.after:
		// The write is lost (it was never acknowledged): so is the
		// epoch it would have stored (SIM12).
		w.chk.stored = t.stored
	}
}
