package pd

import (
	"context"
	"sync"
)

type lockedGC struct {
	mu sync.Mutex
	f  *fakeGC
}

func (l *lockedGC) UpdateServiceGCSafePoint(ctx context.Context, id string, ttl int64, sp uint64) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.UpdateServiceGCSafePoint(ctx, id, ttl, sp)
}

func (l *lockedGC) held(id string) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.entries[id][0]
}

func (l *lockedGC) has(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.f.entries[id]
	return ok
}
