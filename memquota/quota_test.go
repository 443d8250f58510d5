package memquota

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRS1_SharedQuotaNeverPassesItsLimit: concurrent charges never take
// the quota past its limit, and releases return it to zero.
func TestRS1_SharedQuotaNeverPassesItsLimit(t *testing.T) {
	q, err := New("memory-quota", 1000)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				if q.TryAcquire(7) {
					if u := q.Used(); u > q.Limit() {
						t.Errorf("used %d past the limit", u)
					}
					q.Release(7)
				}
			}
		}()
	}
	wg.Wait()
	require.Zero(t, q.Used())
	require.LessOrEqual(t, q.Peak(), int64(1000))
	require.True(t, q.TryAcquire(1000))
	require.False(t, q.TryAcquire(1))
	q.Force(10) // memory already held is counted even past the limit
	require.Equal(t, int64(1010), q.Used())
	q.Release(1010)
	_, err = New("spill-quota", -1)
	require.ErrorContains(t, err, "spill-quota = -1 bytes, must be > 0")
	var nilQ *Quota
	require.True(t, nilQ.TryAcquire(1<<40))
	require.Equal(t, int64(Unlimited), nilQ.Limit())
}

// TestRS10_ReserveIsOnlyForTheRunIndex: with a reserve, TryAcquire stops
// at limit - reserve while TryAcquireReserved may go on to the limit, so
// the holders that spill cannot starve the run indexes; nothing passes
// the limit.
func TestRS10_ReserveIsOnlyForTheRunIndex(t *testing.T) {
	q, err := New("memory-quota", 1000)
	require.NoError(t, err)
	q.SetReserve(100)
	require.Equal(t, int64(100), q.Reserve())
	require.True(t, q.TryAcquire(900))
	require.False(t, q.TryAcquire(1), "the reserve is not for rows")
	require.True(t, q.TryAcquireReserved(100))
	require.False(t, q.TryAcquireReserved(1))
	require.Equal(t, int64(1000), q.Peak())
	q.Release(1000)
	q.SetReserve(5000) // clamped to the limit
	require.Equal(t, int64(1000), q.Reserve())
	var nilQ *Quota
	require.True(t, nilQ.TryAcquireReserved(1<<40))
}
