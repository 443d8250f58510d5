package sim

import (
	"context"
	"fmt"
	"syscall"
	"time"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/normalize"
)

// wrapSink is the bridge's view of the emulator: mutant (meta-tests) →
// checker → storage faults → emulator.
func (w *world) wrapSink(s normalize.Sink) normalize.Sink {
	var out normalize.Sink = &checkSink{c: w.chk, w: w, next: &faultSink{w: w, next: s}}
	return w.mutateSink(out)
}

// checkSink records every write as sent and whether it was acknowledged.
type checkSink struct {
	c    *checker
	w    *world
	next normalize.Sink
}

func (s *checkSink) PutCollectionSchema(ctx context.Context, req *apiv1.PutCollectionSchemaRequest) (*apiv1.PutCollectionSchemaResponse, error) {
	resp, err := s.next.PutCollectionSchema(ctx, req)
	s.w.trace("schema %s policy %s version %d err=%v", req.GetDefinition().GetName(), req.GetUpdatePolicy(), req.GetSchemaVersion(), err != nil)
	return resp, err
}

func (s *checkSink) Ingest(ctx context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error) {
	s.c.batch(b)
	resp, err := s.next.Ingest(ctx, b)
	first, last := uint64(0), uint64(0)
	if n := len(b.GetMutations()); n > 0 {
		first, last = b.GetMutations()[0].GetCommitTs(), b.GetMutations()[n-1].GetCommitTs()
	}
	s.w.mutations += len(b.GetMutations())
	s.w.trace("ingest %s e%d seq %d n %d ts %d-%d err=%v", b.GetSourcePartition(), b.GetSourceEpoch(), b.GetFirstSeq(), len(b.GetMutations()), first, last, err != nil)
	return resp, err
}

func (s *checkSink) AdvancePartition(ctx context.Context, p *apiv1.PartitionProgress) (*apiv1.AdvancePartitionResponse, error) {
	s.c.progress(p)
	resp, err := s.next.AdvancePartition(ctx, p)
	if err == nil {
		s.c.progressAcked(p, resp)
	}
	s.w.progressCalls++
	s.w.trace("advance %s e%d %d err=%v", p.GetSourcePartition(), p.GetSourceEpoch(), p.GetResolvedTs(), err != nil)
	return resp, err
}

func (s *checkSink) GetProgress(ctx context.Context, req *apiv1.GetProgressRequest) (*apiv1.GetProgressResponse, error) {
	return s.next.GetProgress(ctx, req)
}

func (s *checkSink) ListCollections(ctx context.Context, req *apiv1.ListCollectionsRequest) (*apiv1.ListCollectionsResponse, error) {
	return s.next.ListCollections(ctx, req)
}

// faultSink injects the storage faults at the emulator's write boundary
// (specs/sim.md SIM6). The emulator commits every write in one bbolt
// transaction that is fsynced before the call returns, so the state a
// crash leaves on disk is the state after the last write that returned:
// "crash before" is a write that never reached the file, "crash after" a
// write that is durable but whose acknowledgement the adapter never saw.
// bbolt has no VFS to tear a page under: a torn or unsynced last write
// is, by bbolt's two meta pages, a transaction that did not commit, which
// is "crash before". After a crash nothing more reaches storage until the
// world restarts the process.
type faultSink struct {
	w    *world
	next normalize.Sink
}

// write runs one write through the armed fault, if any.
func (s *faultSink) write(what string, do func() error) error {
	w := s.w
	if w.crashed {
		return fmt.Errorf("sim: %s after the process crashed", what)
	}
	f := w.armed
	if f == nil {
		return do()
	}
	w.armed = nil
	w.faultsHit[f.Kind]++
	switch f.Kind {
	case FaultEIO:
		w.trace("storage fault %s at %s", f.Kind, what)
		w.expectFatal = true
		return fmt.Errorf("sim: emulator storage write (%s): %w", what, syscall.EIO)
	case FaultENOSPC:
		w.trace("storage fault %s at %s", f.Kind, what)
		w.expectFatal = true
		return fmt.Errorf("sim: emulator storage write (%s): %w", what, syscall.ENOSPC)
	case FaultSlowDisk:
		d := time.Duration(1+f.Arg%2000) * time.Millisecond
		w.trace("slow disk %v at %s", d, what)
		_ = w.c.Advance(d)
		return do()
	case FaultTorn:
		w.trace("torn crash at %s", what)
		return w.tearAt(f, what, do)
	case FaultCrash:
		after := f.Arg%2 == 1
		w.trace("crash at %s after=%v", what, after)
		if after {
			if err := do(); err != nil {
				w.trace("write before the crash failed: %v", err)
			}
		}
		w.crashed = true
		w.expectFatal = true
		return fmt.Errorf("sim: process crashed at %s", what)
	}
	return do()
}

func (s *faultSink) PutCollectionSchema(ctx context.Context, req *apiv1.PutCollectionSchemaRequest) (resp *apiv1.PutCollectionSchemaResponse, err error) {
	err = s.write("put schema "+req.GetDefinition().GetName(), func() error {
		var e error
		resp, e = s.next.PutCollectionSchema(ctx, req)
		return e
	})
	return resp, err
}

func (s *faultSink) Ingest(ctx context.Context, b *apiv1.MutationBatch) (resp *apiv1.IngestResponse, err error) {
	if s.w.mutant == MutantSwallowError && !s.w.crashed && len(b.GetMutations()) > 0 && s.w.mut.arm(s.w) {
		// The bug: the failed write is reported as done.
		last := b.GetFirstSeq() + uint64(len(b.GetMutations())) - 1
		return &apiv1.IngestResponse{Collection: b.GetCollection(), SourceEpoch: b.GetSourceEpoch(), LastSeq: last}, nil
	}
	err = s.write("ingest "+b.GetSourcePartition(), func() error {
		var e error
		resp, e = s.next.Ingest(ctx, b)
		if e == nil {
			s.w.chk.reached(b.GetSourcePartition(), b.GetSourceEpoch())
		}
		return e
	})
	return resp, err
}

func (s *faultSink) AdvancePartition(ctx context.Context, p *apiv1.PartitionProgress) (resp *apiv1.AdvancePartitionResponse, err error) {
	if m := s.w.mut; s.w.mutant == MutantLostAck && !s.w.crashed {
		if m.lostPart == "" && p.GetResolvedTs() > s.w.chk.acked[p.GetSourcePartition()] && m.arm(s.w) {
			m.lostPart = p.GetSourcePartition()
		}
		if m.lostPart == p.GetSourcePartition() {
			// The bug: acknowledged, never stored.
			return &apiv1.AdvancePartitionResponse{}, nil
		}
	}
	err = s.write("advance "+p.GetSourcePartition(), func() error {
		var e error
		resp, e = s.next.AdvancePartition(ctx, p)
		if e == nil {
			s.w.chk.reached(p.GetSourcePartition(), p.GetSourceEpoch())
		}
		return e
	})
	return resp, err
}

func (s *faultSink) GetProgress(ctx context.Context, req *apiv1.GetProgressRequest) (*apiv1.GetProgressResponse, error) {
	if s.w.crashed {
		return nil, fmt.Errorf("sim: read after the process crashed")
	}
	return s.next.GetProgress(ctx, req)
}

func (s *faultSink) ListCollections(ctx context.Context, req *apiv1.ListCollectionsRequest) (*apiv1.ListCollectionsResponse, error) {
	if s.w.crashed {
		return nil, fmt.Errorf("sim: read after the process crashed")
	}
	return s.next.ListCollections(ctx, req)
}
