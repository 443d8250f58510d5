package storage

import (
	"fmt"
	"testing"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/docstore"
)

// BenchmarkCommit measures one durable transaction: empty (the fsync floor)
// and with 1,000 document entries.
func BenchmarkCommit(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			db, err := Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			ent := &docstore.Entry{Version: 1, Partition: "table:1", Fields: map[string]*apiv1.Value{
				"id": {Kind: &apiv1.Value_Int64Value{Int64Value: 1}}, "body": {Kind: &apiv1.Value_StringValue{StringValue: "some stored text of a modest row"}}}}
			ps := &apiv1.PartitionState{SourcePartition: "table:1", Collection: "c"}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				err := db.Update(func(tx *Tx) error {
					for j := 0; j < n; j++ {
						if err := tx.PutEntry("c", fmt.Sprintf("%010d", i*n+j), ent); err != nil {
							return err
						}
					}
					ps.LastSeq = uint64(i)
					return tx.PutPartition(ps)
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
