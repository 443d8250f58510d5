package mvcc

import (
	"testing"
)

// FuzzOps drives the store with an arbitrary sequence of operations
// decoded from bytes: it must never panic, and its lock count must match a
// lock scan after every step.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{1, 1, 1, 2, 2, 2, 3, 3, 3, 200, 7, 9})
	f.Fuzz(func(t *testing.T, prog []byte) {
		s := New(func(Change) {})
		for i := 0; i+2 < len(prog); i += 3 {
			op, a, b := prog[i]%10, prog[i+1], prog[i+2]
			key := []byte{'k', a % 8}
			ts := uint64(a) + 1
			ts2 := ts + uint64(b)
			switch op {
			case 0:
				s.Prewrite([]Mutation{{Op: Op(1 + b%3), Key: key, Value: []byte{b}}}, PrewriteOptions{Primary: key, StartTs: ts, TTL: uint64(b), AsyncCommit: b%2 == 0, MinCommitTs: ts2})
			case 1:
				s.Commit([][]byte{key}, ts, ts2)
			case 2:
				s.Rollback([][]byte{key}, ts)
			case 3:
				s.OnePC([]Mutation{{Op: Op(1 + b%3), Key: key, Value: []byte{b}}}, ts, ts2)
			case 4:
				s.Get(key, ts2)
			case 5:
				s.Scan(nil, nil, ts2, int(b%4))
			case 6:
				s.CheckTxnStatus(key, ts, ts2<<18)
			case 7:
				s.ResolveLock(nil, nil, ts, uint64(b%2)*ts2)
			case 8:
				s.GC(uint64(b) / 4)
			case 9:
				s.CheckSecondaryLocks([][]byte{key, {'k', b % 8}}, ts)
				s.ScanVersions(nil, nil, uint64(a), uint64(b))
			}
			if n := len(s.ScanLocks(nil, nil, ^uint64(0), 0)); n != s.NumLocks() {
				t.Fatalf("step %d: NumLocks %d, scan finds %d", i/3, s.NumLocks(), n)
			}
		}
	})
}
