//go:build invariants

package logpuller

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// mustPanicWith runs f and requires a panic whose message contains want.
func mustPanicWith(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		require.NotNil(t, r, "no invariant fired; want %q", want)
		require.True(t, strings.Contains(fmt.Sprint(r), want), "panic %q does not contain %q", r, want)
	}()
	f()
}

// rule: LP12. Under the invariants tag every frontier operation re-checks
// the cover, the cached minimum and that the minimum never fell; the core
// re-checks its held-bytes accounting. Each case breaks one of them the
// way a bug would (internal state is forged on purpose: this tests the
// checker, not the core) and requires the next operation to catch it.
func TestInvariantsCatchBrokenFrontier(t *testing.T) {
	t.Run("cover", func(t *testing.T) {
		f := newFrontier(tableSpan(1), 10)
		_, err := f.lock(spanOf(tableSpan(1).StartKey, splitAt(5)), 1)
		require.NoError(t, err)
		f.ranges[0].end = splitAt(4) // a gap between the region and the hole
		mustPanicWith(t, "gap or overlap", func() { f.forward(1, 20) })
	})
	t.Run("cached min", func(t *testing.T) {
		f := newFrontier(tableSpan(1), 10)
		_, err := f.lock(tableSpan(1), 1)
		require.NoError(t, err)
		require.Equal(t, uint64(10), f.min())
		f.minTs = 7 // a stale cache
		mustPanicWith(t, "cached min 7", func() { f.forward(1, 20) })
	})
	t.Run("min never falls", func(t *testing.T) {
		f := newFrontier(tableSpan(1), 10)
		_, err := f.lock(tableSpan(1), 1)
		require.NoError(t, err)
		f.forward(1, 30)
		require.Equal(t, uint64(30), f.min())
		f.ranges[0].ts, f.minValid = 25, false // a lock that lost its ts
		mustPanicWith(t, "fell from 30 to 25", func() { f.min() })
	})
	t.Run("held bytes", func(t *testing.T) {
		p, _ := newTestPuller(t, 10)
		_, err := p.AddRegion(1, 100, tableSpan(1))
		require.NoError(t, err)
		mustHandle(t, p, rowsEv(1, 100, initialized(), prewrite(5, 20, "v", "")))
		p.heldBytes += 3 // an accounting slip
		mustPanicWith(t, "LP11", func() { _, _ = p.HandleEvent(rowsEv(1, 100, commit(5, 20, 21))) })
	})
	t.Run("matcher recount", func(t *testing.T) {
		p, _ := newTestPuller(t, 10)
		_, err := p.AddRegion(1, 100, tableSpan(1))
		require.NoError(t, err)
		mustHandle(t, p, rowsEv(1, 100, initialized(), prewrite(5, 20, "v", "")))
		p.regions[1].m.bytes--
		p.heldBytes--
		mustPanicWith(t, "its table holds", func() { p.FailRegion(1, RetryStreamFailure, nil) })
	})
}
