package schemastore

import (
	"context"
	"testing"
)

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestResolvedAdvancedAnnouncesPublishedResolvedTs: the channel handed out
// before a publish is closed by it (minicdc's store waits, M22 and M34,
// wake on it instead of a timer); a span report that does not move the
// store's resolved ts (the minimum over both DDL spans) closes nothing.
func TestResolvedAdvancedAnnouncesPublishedResolvedTs(t *testing.T) {
	f := newFakeSnapshot()
	f.withSystemTables(t, nil)
	src := &fakeSource{}
	s, err := New(Config{Dir: t.TempDir(), Snapshot: f, InitialTs: snapTs, Source: src, FollowHistory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.RegisterKeyspace(ctx, 0); err != nil {
		t.Fatal(err)
	}
	ch := s.ResolvedAdvanced()
	src.subs[0].c.AdvanceResolvedTs(1200) // the history span is still at the snapshot
	if isClosed(ch) || s.ResolvedTs() != snapTs {
		t.Fatalf("announced without a new resolved ts (resolved %d)", s.ResolvedTs())
	}
	src.subs[1].c.AdvanceResolvedTs(1150)
	if !isClosed(ch) || s.ResolvedTs() != 1150 {
		t.Fatalf("resolved ts %d published without closing the channel taken before", s.ResolvedTs())
	}
	next := s.ResolvedAdvanced()
	if isClosed(next) {
		t.Fatal("the next channel is already closed")
	}
	src.subs[1].c.AdvanceResolvedTs(1300)
	if !isClosed(next) || s.ResolvedTs() != 1200 {
		t.Fatalf("resolved %d, channel closed %v", s.ResolvedTs(), isClosed(next))
	}
}
