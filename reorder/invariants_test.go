//go:build invariants

package reorder

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRS8_InvariantsCatchBrokenState: with the invariants tag every
// operation checks the buffer; a state no operation may produce panics
// with what broke.
func TestRS8_InvariantsCatchBrokenState(t *testing.T) {
	b := newBuf(t, 100, 1<<20)
	add(t, b, 10, "a")
	add(t, b, 20, "b")
	b.unsealedBytes++ // accounting off by one
	require.PanicsWithValue(t, `reorder: invariant violated in partition "table:42": unsealed bytes 31, rows sum to 30`, func() { add(t, b, 30, "c") })

	b = newBuf(t, 100, 1<<20)
	add(t, b, 10, "a")
	add(t, b, 20, "b")
	require.NoError(t, b.SealCheckpoint(10))
	b.at(0).CommitTs = 15 // a sealed row above the seal
	require.Panics(t, func() { _ = b.Drain(nil) })

	b = newBuf(t, 100, 1<<20)
	add(t, b, 10, "a")
	require.NoError(t, b.SealCheckpoint(10))
	require.Len(t, b.Drain(nil), 1)
	b.lastOut.Ordinal = 5 // the next row would leave out of order
	add(t, b, 10+1, "b")
	require.NoError(t, b.SealCheckpoint(11))
	b.at(0).CommitTs = 10
	require.Panics(t, func() { _ = b.Drain(nil) })
}
