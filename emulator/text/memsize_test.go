package text

import (
	"math/rand"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// memCorpus applies n generated documents to m in batches; the ops and
// their texts are garbage once applied, so what stays on the heap is what
// Mem keeps. Words follow a skewed distribution over a vocabulary of
// vocab words, like product text.
func memCorpus(t testing.TB, m *Mem, r *rand.Rand, n, vocab int) {
	words := make([]string, vocab)
	for i := range words {
		words[i] = "w" + strconv.FormatInt(r.Int63n(1<<40), 36)
	}
	for done := 0; done < n; {
		ops := make([]Op, 0, 1000)
		for i := 0; i < 1000 && done < n; i++ {
			var sb strings.Builder
			for j := 0; j < 4+r.Intn(16); j++ {
				k := int(float64(vocab) * r.Float64() * r.Float64() * r.Float64())
				sb.WriteString(words[k])
				sb.WriteByte(' ')
			}
			pk := "doc-" + strconv.Itoa(r.Intn(2*n))
			ops = append(ops, Op{PK: pk, Texts: []string{sb.String(), words[r.Intn(vocab)]}})
			done++
		}
		require.NoError(t, m.Apply(ops))
	}
}

func heapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// Rule TXT-M6: Mem.Bytes follows the heap Mem really holds. The test
// builds an index of seeded random documents (upserts included, so
// compaction runs) and compares Bytes with the growth of the live heap;
// the ratio must stay within [0.75, 1.33]. It also checks that the count
// kept while applying equals a recount of the structures.
func TestMemBytesTracksHeapTXTM6(t *testing.T) {
	s := seed(t)
	r := rand.New(rand.NewSource(s))
	n := 40000
	if testing.Short() {
		n = 10000
	}
	// SFEMU_TEXT_MEM_DOCS runs it at a larger size (the spec's numbers).
	if v, err := strconv.Atoi(os.Getenv("SFEMU_TEXT_MEM_DOCS")); err == nil && v > 0 {
		n = v
	}
	before := heapNow()
	m, err := OpenMem([]string{"body", "tag"})
	require.NoError(t, err)
	t.Logf("empty index: heap grew %d bytes, accounted %d", int64(heapNow())-int64(before), m.Bytes())
	memCorpus(t, m, r, n, max(20000, n/10))
	grown := float64(heapNow()) - float64(before)
	acc := m.Bytes()
	ratio := grown / float64(acc)
	t.Logf("seed %d: %d docs (%d live), accounted %d bytes, heap grew %.0f bytes, heap/accounted %.3f", s, n, len(m.byPK), acc, grown, ratio)
	require.InDelta(t, 1.0, ratio, 0.33, "seed %d: heap/accounted ratio", s)

	m.mu.Lock()
	inc := m.bytes
	m.recount()
	require.Equal(t, m.bytes, inc, "seed %d: incremental count differs from a recount", s)
	m.mu.Unlock()
	runtime.KeepAlive(m)
	require.NoError(t, m.Close())
}
