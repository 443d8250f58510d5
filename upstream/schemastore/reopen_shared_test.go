package schemastore

import "testing"

// TestReopenParsesEachBodyOnce (rule SS56): after a restart the partitions
// of one table version still share one TableInfo, which they can only do
// when open parses each distinct body once and hands out that one value.
func TestReopenParsesEachBodyOnce(t *testing.T) {
	e := baseEnv(t)
	e.cfg.Snapshot = nil
	e.reopen()
	a, b, c := e.info(31, snapTs), e.info(32, snapTs), e.info(33, snapTs)
	if a != b || b != c {
		t.Fatal("partitions of one version got separate TableInfos after reopen")
	}
	if a.ID != 30 {
		t.Fatalf("partition 31 maps to %d, want 30", a.ID)
	}
}
