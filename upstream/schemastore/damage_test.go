package schemastore

import (
	"encoding/binary"
	"errors"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"math/rand"
	"os"
	"strconv"
	"testing"
)

// damageKnobs: the seed of TestSS58_DamagedFileIsAnError
// (SFEMU_SS_DAMAGE_SEED replays one) and how many damaged
// copies it opens (SFEMU_SS_DAMAGE_ROUNDS).
func damageKnobs(t *testing.T) (int64, int) {
	seed, rounds := int64(1), 24
	if s := os.Getenv("SFEMU_SS_DAMAGE_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seed = v
	}
	if s := os.Getenv("SFEMU_SS_DAMAGE_ROUNDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		rounds = v
	}
	return seed, rounds
}

// damage returns a copy of a store file with one seeded kind of damage:
// bytes flipped inside a page, the file cut short, or a crafted page
// header or branch pointer (a page that points at itself, past the end,
// or is of no known type), the shapes bbolt faults or panics on.
func damage(rng *rand.Rand, pristine []byte, pageSize int) ([]byte, string) {
	b := append([]byte(nil), pristine...)
	pages := len(b) / pageSize
	page := 2 + rng.Intn(pages-2)
	off := page * pageSize
	ne := binary.NativeEndian
	switch k := rng.Intn(6); k {
	case 0: // flip bytes anywhere in a data page
		for i := 0; i < 1+rng.Intn(8); i++ {
			b[off+rng.Intn(pageSize)] ^= byte(1 + rng.Intn(255))
		}
		return b, "flipped bytes in page " + strconv.Itoa(page)
	case 1: // cut below the data
		n := pageSize*2 + rng.Intn(len(b)-pageSize*2)
		return b[:n], "truncated to " + strconv.Itoa(n)
	case 2: // a page of no known type
		ne.PutUint16(b[off+8:], uint16(rng.Intn(1<<16)))
		return b, "page type of page " + strconv.Itoa(page)
	case 3: // an element count far past the page
		ne.PutUint16(b[off+10:], uint16(1000+rng.Intn(60000)))
		return b, "element count of page " + strconv.Itoa(page)
	case 4: // an overflow count past the file
		ne.PutUint32(b[off+12:], uint32(pages+rng.Intn(1<<20)))
		return b, "overflow of page " + strconv.Itoa(page)
	default: // every branch element of a page points at a drawn page: itself, past the end, a meta page
		const branchFlag, elemSize = 0x01, 16
		for p := 2; p < pages; p++ {
			o := p * pageSize
			if ne.Uint16(b[o+8:])&branchFlag == 0 {
				continue
			}
			targets := []uint64{uint64(p), uint64(pages + 5), 0, 1 << 40}
			t := targets[rng.Intn(len(targets))]
			for i := 0; i < int(ne.Uint16(b[o+10:])); i++ {
				ne.PutUint64(b[o+16+i*elemSize+8:], t)
			}
			return b, "branch pointers of page " + strconv.Itoa(p) + " to " + strconv.FormatUint(t, 10)
		}
		b[off+rng.Intn(pageSize)] ^= 0xff
		return b, "flipped a byte in page " + strconv.Itoa(page)
	}
}

// Rule SS58: a damaged store file (bytes flipped, cut short, crafted
// page headers and pointers) is a *CorruptError naming the file at open
// and in VerifyFile, never a crash (bbolt's own check runs on a goroutine
// of its own, where a fault or panic cannot be recovered); a file whose
// damage lies where nothing reads it opens and holds the same history.
func TestSS58_DamagedFileIsAnError(t *testing.T) {
	seed, rounds := damageKnobs(t)
	t.Logf("seed %d rounds %d (SFEMU_SS_DAMAGE_SEED, SFEMU_SS_DAMAGE_ROUNDS)", seed, rounds)
	e := baseEnv(t)
	sampleHistory(e)
	for i := 0; i < 40; i++ { // enough history for branch pages
		e.apply(uint64(2000+10*i), withTable(job(int64(10+i), model.ActionCreateTable, 10, int64(200+i), int64(10+i)), tbl(int64(200+i), "t"+strconv.Itoa(i), 30)))
	}
	want := colNames(e.info(20, 1100)) + "|" + colNames(e.info(239, 2390))
	e.closeStore()
	path := e.store.Path(0)
	pristine, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(seed))
	opened, refused := 0, 0
	fixed := craftedDamage(pristine, os.Getpagesize())
	for round := 0; round < len(fixed)+rounds; round++ {
		var b []byte
		var what string
		if round < len(fixed) {
			b, what = fixed[round].b, fixed[round].what
		} else {
			b, what = damage(rng, pristine, os.Getpagesize())
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		verr := VerifyFile(path)
		oerr := e.openErr()
		for _, err := range []error{verr, oerr} {
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("round %d (%s): want a *CorruptError, got %v", round, what, err)
			}
			var ce *CorruptError
			if errors.As(err, &ce) && ce.Path != path {
				t.Fatalf("round %d (%s): error names %q, not the file %s", round, what, ce.Path, path)
			}
		}
		if (verr == nil) != (oerr == nil) {
			t.Fatalf("round %d (%s): verify says %v, open says %v", round, what, verr, oerr)
		}
		if oerr != nil {
			refused++
			continue
		}
		opened++
		e.reopen()
		if got := colNames(e.info(20, 1100)) + "|" + colNames(e.info(239, 2390)); got != want {
			t.Fatalf("round %d (%s): opened a damaged file and read %q, stored %q", round, what, got, want)
		}
		e.closeStore()
	}
	t.Logf("%d damaged copies refused, %d opened with the same history", refused, opened)
}

type damaged struct {
	b    []byte
	what string
}

// craftedDamage is the damage every run tries, whatever the seed: the
// file cut in half and cut by one page, and branch and leaf pages given a
// type flag more (0x10), which a check testing one bit passes and bbolt
// asserts on.
func craftedDamage(pristine []byte, ps int) []damaged {
	out := []damaged{
		{pristine[:len(pristine)/2], "cut in half"},
		{pristine[:len(pristine)-ps], "cut by one page"},
	}
	ne := binary.NativeEndian
	var typed []int
	for p := 2; (p+1)*ps <= len(pristine); p++ {
		if f := ne.Uint16(pristine[p*ps+8:]); f == 0x01 || f == 0x02 {
			typed = append(typed, p)
		}
	}
	// At most a dozen of them, spread over the file, the first included.
	for i := 0; i < len(typed); i += max(1, len(typed)/12) {
		p := typed[i]
		b := append([]byte(nil), pristine...)
		ne.PutUint16(b[p*ps+8:], ne.Uint16(b[p*ps+8:])|0x10)
		out = append(out, damaged{b, "page " + strconv.Itoa(p) + " retyped"})
	}
	return out
}
