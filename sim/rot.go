package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/searchfabric/sfemu/emulator/storage"
	"github.com/searchfabric/sfemu/upstream/schemastore"
	bolt "go.etcd.io/bbolt"
)

// The at-rest damage fault (specs/sim.md SIM17): while sfemu is stopped,
// one of its files is damaged: bytes flipped in a page, inside a record,
// a page torn at a sector, the file cut short below its data. The next
// open must refuse it with an error naming the file (never a panic or a
// fault), or, when the damage lies where nothing reads it, serve exactly
// the state that was acknowledged. A refused file is put back as it was
// (the operator restores it) and the run goes on.

// bbolt's layout as far as the damage needs it: pages of the OS page
// size, two meta pages whose body holds the high-water page at 40 and the
// txid at 48, a 16-byte page header with flags at 8 and count at 10.
const (
	pageHdr      = 16
	metaPgidOff  = pageHdr + 40
	metaTxidOff  = pageHdr + 48
	leafPageFlag = 0x02
)

// highWater is the page count the newer valid-looking meta page in b
// claims (at least 2, at most what a file of size bytes holds).
func highWater(b []byte, ps int, size int64) int {
	ne := binary.NativeEndian
	best, bestTx := 2, uint64(0)
	for slot := 0; slot < 2 && (slot+1)*ps <= len(b); slot++ {
		m := b[slot*ps:]
		if tx := ne.Uint64(m[metaTxidOff:]); tx >= bestTx {
			bestTx, best = tx, int(ne.Uint64(m[metaPgidOff:]))
		}
	}
	return max(2, min(best, int(size/int64(ps))))
}

// damageFile returns a damaged copy of a bbolt file and what was done.
// Meta pages are left alone: bbolt falls back to the other meta page when
// one is invalid, which is how it survives a torn meta write, so damage
// to the newer meta at rest loses its one commit unnoticed; that limit is
// bbolt's (specs/sim.md SIM17), not something a reopen can detect.
func damageFile(rng *rand.Rand, b []byte) ([]byte, string) {
	ps := os.Getpagesize()
	out := append([]byte(nil), b...)
	hwm := highWater(out, ps, int64(len(out)))
	if hwm <= 2 {
		return out, "nothing to damage"
	}
	page := 2 + rng.Intn(hwm-2)
	off := page * ps
	switch rng.Intn(4) {
	case 0:
		n := 1 + rng.Intn(8)
		for i := 0; i < n; i++ {
			out[off+rng.Intn(ps)] ^= byte(1 + rng.Intn(255))
		}
		return out, fmt.Sprintf("%d bytes flipped in page %d", n, page)
	case 1:
		n := 2*ps + rng.Intn((hwm-2)*ps)
		return out[:n], fmt.Sprintf("cut to %d bytes (pages reach %d)", n, hwm*ps)
	case 2:
		sector := 1 + rng.Intn(ps/512-1)
		fill := byte(rng.Intn(2) * 0xA5)
		for i := off + sector*512; i < off+ps; i++ {
			out[i] = fill
		}
		return out, fmt.Sprintf("page %d torn after sector %d", page, sector)
	default:
		ne := binary.NativeEndian
		for try := 0; try < hwm; try++ {
			p := 2 + (page-2+try)%(hwm-2)
			o := p * ps
			count := int(ne.Uint16(out[o+10:]))
			if ne.Uint16(out[o+8:]) != leafPageFlag || count == 0 || pageHdr+count*16 >= ps {
				continue
			}
			at := o + pageHdr + count*16 + rng.Intn(ps-pageHdr-count*16)
			out[at] ^= byte(1 + rng.Intn(255))
			return out, fmt.Sprintf("a record byte flipped in leaf page %d", p)
		}
		out[off+rng.Intn(ps)] ^= 0xff
		return out, fmt.Sprintf("a byte flipped in page %d", page)
	}
}

// rot applies the at-rest damage fault: the adapter and the emulator
// stop, a file is damaged, and they open again.
func (w *world) rot(f Fault) {
	if w.cur != nil {
		_ = w.cur.close()
		w.cur = nil
	}
	rng := rand.New(rand.NewSource(int64(f.Arg >> 1)))
	schemaFiles, _ := filepath.Glob(filepath.Join(w.adapterDir, "schemastore", "*.db"))
	sort.Strings(schemaFiles)
	if f.Arg%4 == 0 && len(schemaFiles) > 0 && w.mutant != MutantReseal {
		w.rotSchemaStore(rng, schemaFiles[rng.Intn(len(schemaFiles))])
		return
	}
	w.rotEmulator(rng)
	w.startAdapter()
}

func (w *world) rotEmulator(rng *rand.Rand) {
	acked, err := w.emuState()
	if err != nil {
		w.chk.fail(InvIntegrity, "reading the emulator's state before stopping it: %v", err)
		return
	}
	if err := w.emu.Close(); err != nil {
		w.trace("emulator close: %v", err)
	}
	path := filepath.Join(w.emuDir, storage.FileName)
	pristine, err := readStore(path)
	if err != nil {
		w.chk.fail(InvIntegrity, "reading %s: %v", path, err)
		return
	}
	var damaged []byte
	var what string
	if w.mutant == MutantReseal && w.mut.arm(w) {
		damaged, what, err = resealRecord(path, rng)
		if err != nil {
			w.chk.fail(InvIntegrity, "mutant %s: %v", w.mutant, err)
			return
		}
	} else {
		damaged, what = damageFile(rng, pristine)
	}
	if err := writeStore(path, damaged, len(damaged) < len(pristine)); err != nil {
		w.chk.fail(InvIntegrity, "writing %s: %v", path, err)
		return
	}
	w.faultsHit[FaultRot]++
	w.trace("rot %s: %s", storage.FileName, what)
	w.chk.count(InvIntegrity)
	if err := w.openEmulatorGuarded(); err != nil {
		w.trace("rot refused: %v", err)
		if !strings.Contains(err.Error(), path) {
			w.chk.fail(InvIntegrity, "a damaged %s (%s) is refused without naming the file: %v", storage.FileName, what, err)
			return
		}
		if err := writeStore(path, pristine, false); err != nil {
			w.chk.fail(InvIntegrity, "restoring %s: %v", path, err)
			return
		}
		if w.reopenEmulator() != nil {
			return
		}
		return
	}
	got, err := w.emuState()
	switch {
	case err != nil:
		w.chk.fail(InvIntegrity, "a damaged %s (%s) opened, then reading it failed: %v", storage.FileName, what, err)
	case got != acked:
		w.chk.fail(InvIntegrity, "a damaged %s (%s) opened and serves state %s, %s was acknowledged", storage.FileName, what, got, acked)
	default:
		w.trace("rot unread: the state is the acknowledged one")
	}
	w.checkStored()
	w.mut.restarted()
}

// openEmulatorGuarded opens the emulator; a panic inside it is a
// violation (a damaged file must be an error), reported as an error here
// so the run stops cleanly.
func (w *world) openEmulatorGuarded() (err error) {
	defer func() {
		if r := recover(); r != nil {
			w.chk.fail(InvIntegrity, "opening a damaged store panicked: %v", r)
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return w.openEmulator()
}

// rotSchemaStore damages the schema store's file: the adapter's start
// must refuse it as a *CorruptError naming the file, or open it where the
// damage is never read (the consistency checks then hold the data to what
// upstream has).
func (w *world) rotSchemaStore(rng *rand.Rand, path string) {
	pristine, err := readStore(path)
	if err != nil {
		w.chk.fail(InvIntegrity, "reading %s: %v", path, err)
		return
	}
	damaged, what := damageFile(rng, pristine)
	if err := writeStore(path, damaged, len(damaged) < len(pristine)); err != nil {
		w.chk.fail(InvIntegrity, "writing %s: %v", path, err)
		return
	}
	w.faultsHit[FaultRot]++
	w.trace("rot %s: %s", filepath.Base(path), what)
	w.chk.count(InvIntegrity)
	w.schemaRot = &schemaRot{path: path, pristine: pristine, what: what}
	w.startAdapter()
	w.schemaRot = nil
}

// schemaRot is a damaged schema store file waiting for the adapter's
// start to judge it.
type schemaRot struct {
	path     string
	pristine []byte
	what     string
}

// schemaRotRefused judges a start that failed over a damaged schema
// store, restores the file and starts again.
func (w *world) schemaRotRefused(err error) {
	r := w.schemaRot
	w.schemaRot = nil
	if !errors.Is(err, schemastore.ErrCorrupt) || !strings.Contains(err.Error(), r.path) {
		w.chk.fail(InvIntegrity, "a damaged schema store (%s) stops the start without a corrupt-store error naming %s: %v", r.what, r.path, err)
		return
	}
	w.trace("rot refused: %v", err)
	if err := writeStore(r.path, r.pristine, false); err != nil {
		w.chk.fail(InvIntegrity, "restoring %s: %v", r.path, err)
		return
	}
	w.startAdapter()
}

// resealRecord is the mutant `reseal` (SIM20): a document's stored value
// is changed and its checksum computed again over the new bytes, as a
// store that skipped the checksum check would serve a damaged record. A
// letter of the payload is changed, so the record still decodes.
func resealRecord(path string, rng *rand.Rand) ([]byte, string, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, "", err
	}
	what := ""
	err = db.Update(func(tx *bolt.Tx) error {
		docs := tx.Bucket([]byte("docs"))
		if docs == nil {
			return errors.New("no docs bucket")
		}
		var colls [][]byte
		_ = docs.ForEachBucket(func(k []byte) error {
			colls = append(colls, append([]byte(nil), k...))
			return nil
		})
		for _, i := range rng.Perm(len(colls)) {
			b := docs.Bucket(colls[i])
			var keys [][]byte
			_ = b.ForEach(func(k, v []byte) error {
				keys = append(keys, append([]byte(nil), k...))
				return nil
			})
			for _, j := range rng.Perm(len(keys)) {
				v := append([]byte(nil), b.Get(keys[j])...)
				for at := len(v) - 1; at >= 4; at-- {
					if c := v[at]; c >= 'a' && c <= 'y' {
						v[at]++
						scope := append([]byte("docs/"), colls[i]...)
						sum := crc32.Update(0, castagnoli, scope)
						sum = crc32.Update(sum, castagnoli, []byte{0})
						sum = crc32.Update(sum, castagnoli, keys[j])
						binary.BigEndian.PutUint32(v, crc32.Update(sum, castagnoli, v[4:]))
						what = fmt.Sprintf("record %q of collection %s changed and resealed", keys[j], colls[i])
						return b.Put(keys[j], v)
					}
				}
			}
		}
		return errors.New("no document with a letter to change")
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, "", err
	}
	b, err := readStore(path)
	return b, what, err
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// readStore reads a bbolt file up to the high-water mark of its meta
// pages: bbolt grows its file in 16 MiB steps, and nothing past the
// pages in use is read back, so the damage and the torn writes work on
// that prefix only.
func readStore(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	ps := os.Getpagesize()
	head := make([]byte, min(st.Size(), int64(2*ps)))
	if _, err := f.ReadAt(head, 0); err != nil {
		return nil, err
	}
	n := min(st.Size(), int64(highWater(head, ps, st.Size())*ps))
	b := make([]byte, n)
	_, err = f.ReadAt(b, 0)
	return b, err
}

// writeStore writes b over the start of the file at path, and cuts the
// file to len(b) when cut is set.
func writeStore(path string, b []byte, cut bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return err
	}
	if cut {
		if err := f.Truncate(int64(len(b))); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
