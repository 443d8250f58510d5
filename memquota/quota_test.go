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
