package fakeupstream_test

import (
	"fmt"
	"testing"

	"github.com/searchfabric/sfemu/fakeupstream"
)

func benchCluster(b *testing.B, durable bool) *fakeupstream.Cluster {
	b.Helper()
	cfg := fakeupstream.Config{Seed: 1}
	if durable {
		cfg.Dir = b.TempDir()
	}
	c, err := fakeupstream.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

var benchValue = make([]byte, 100)

// Single-row 1PC commits, one committer (each waits for its own fsync
// when durable).
func BenchmarkCommit1PC(b *testing.B) {
	for _, durable := range []bool{false, true} {
		b.Run(fmt.Sprintf("durable=%v", durable), func(b *testing.B) {
			c := benchCluster(b, durable)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Put(rowKey(int64(i)), benchValue); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}

// Single-row 1PC commits from many goroutines: group commit shares fsyncs.
func BenchmarkCommit1PCParallel(b *testing.B) {
	for _, durable := range []bool{false, true} {
		b.Run(fmt.Sprintf("durable=%v", durable), func(b *testing.B) {
			c := benchCluster(b, durable)
			b.ReportAllocs()
			b.SetParallelism(16)
			var next int64
			var mu = make(chan struct{}, 1)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					mu <- struct{}{}
					next++
					k := next
					<-mu
					if _, err := c.Put(rowKey(k), benchValue); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}

// 512-row transactions, 1PC and 2PC (prewrite + commit).
func BenchmarkCommit512Rows(b *testing.B) {
	for _, mode := range []string{"1pc", "2pc"} {
		for _, durable := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/durable=%v", mode, durable), func(b *testing.B) {
				c := benchCluster(b, durable)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					txn := c.Begin()
					for j := 0; j < 512; j++ {
						txn.Set(rowKey(int64(i*512+j)), benchValue)
					}
					var err error
					if mode == "1pc" {
						_, err = txn.Commit1PC()
					} else {
						_, err = txn.Commit()
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*512)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}
