// Package seedtest gives the codec packages' property tests one seeded
// source of randomness: the -seed flag, else $TIDBCODEC_SEED, else the
// clock. The seed is logged when a test fails, so a failure can be replayed.
package seedtest

import (
	"flag"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"
)

var seedFlag = flag.Int64("seed", 0, "seed for property tests (0: $TIDBCODEC_SEED or time-based)")

// Rand returns a generator seeded for t and arranges for the seed to be
// logged if t fails.
func Rand(t testing.TB) *rand.Rand {
	seed := *seedFlag
	if seed == 0 {
		if s, err := strconv.ParseInt(os.Getenv("TIDBCODEC_SEED"), 10, 64); err == nil {
			seed = s
		}
	}
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay with -seed=%d", seed)
		}
	})
	return rand.New(rand.NewSource(seed))
}
