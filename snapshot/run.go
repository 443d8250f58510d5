package snapshot

// The runner: the I/O side. Workers take pending ranges, scan each in
// bounded chunks at S, hand every chunk to the writer (decode, lower,
// ingest; it returns once the emulator acknowledged the rows), then record
// the chunk in the state and save it.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/searchfabric/sfemu/memquota"
	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// DefaultConcurrency is the number of ranges read in parallel
// (--snapshot-concurrency).
const DefaultConcurrency = 4

// DefaultChunkRows bounds the rows of one scan.
const DefaultChunkRows = 2048

// Writer ingests the rows of one chunk of table (an index into
// State.Tables); it returns once they were acknowledged. kvs are owned
// by the call. Calls for one table may run concurrently.
type Writer interface {
	WriteChunk(ctx context.Context, table int, kvs []kvevent.KV) error
	// FinishTable stores table's progress at S (every range was read;
	// rows is the number of rows acknowledged over all its runs).
	FinishTable(ctx context.Context, table int, rows uint64) error
}

// Config configures Run.
type Config struct {
	// Reader scans at S: client-go's snapshot over gRPC, the embedded
	// cluster's MVCC in process.
	Reader kvevent.SnapshotReader
	Writer Writer
	// Concurrency is the number of ranges read in parallel (default 4).
	Concurrency int
	// ChunkRows bounds the rows of one scan (default 2048).
	ChunkRows int
	// Quota bounds the bytes of the chunks held at once (scanned and not
	// yet acknowledged): a chunk that does not fit waits for another to
	// be released; a chunk alone always proceeds (SN4). Nil: unbounded.
	Quota *memquota.Quota
	// Save persists the state (nil: not persisted). It is called with the
	// runner's lock held, at most every SaveEvery and whenever a range
	// or a table completes.
	Save      func(*State) error
	SaveEvery time.Duration
	// Progress receives the counters (nil: none).
	Progress *Progress
	// Now is the clock of progress and save throttling (default
	// time.Now).
	Now func() time.Time
	// AfterChunk, when set, is called after each chunk was recorded
	// (tests stop a snapshot at a chosen point by returning an error).
	AfterChunk func(t Task, rows int) error
}

// Run reads every pending range of st at st.Ts and finishes each table
// once all its ranges were read. It returns the first error (the state
// keeps what was acknowledged before it); ctx's end stops it.
func Run(ctx context.Context, st *State, cfg Config) error {
	if cfg.Reader == nil || cfg.Writer == nil || st == nil {
		return errors.New("snapshot: Run needs a state, a reader and a writer")
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.ChunkRows <= 0 {
		cfg.ChunkRows = DefaultChunkRows
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SaveEvery <= 0 {
		cfg.SaveEvery = 200 * time.Millisecond
	}
	r := &runner{st: st, cfg: cfg, lastSave: cfg.Now()}
	r.held.L = &r.heldMu
	if cfg.Progress != nil {
		cfg.Progress.Begin(st, cfg.Now())
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Tables with every range read but not finished (a stop between the
	// two) finish first.
	for ti := range st.Tables {
		if st.Tables[ti].AllRead() && !st.Tables[ti].Finished {
			if err := r.finish(ctx, ti); err != nil {
				return err
			}
		}
	}
	tasks := make(chan Task)
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Concurrency)
	for range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range tasks {
				if err := r.readRange(ctx, t); err != nil {
					errs <- err
					cancel()
					for range tasks { // drain so the feeder ends
					}
					return
				}
			}
		}()
	}
	pending := st.Pending()
feed:
	for _, t := range pending {
		select {
		case tasks <- t:
		case <-ctx.Done():
			break feed
		}
	}
	close(tasks)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return r.save(true)
}

type runner struct {
	st  *State
	cfg Config

	mu       sync.Mutex // st, lastSave
	lastSave time.Time

	heldMu    sync.Mutex
	held      sync.Cond
	heldBytes int64 // bytes of chunks held by this runner's workers
}

// readRange scans one range chunk by chunk from its resume key.
func (r *runner) readRange(ctx context.Context, t Task) error {
	r.mu.Lock()
	tb := r.st.Tables[t.Table]
	from := r.st.Resume(t)
	end := tb.Ranges[t.Range].End
	ts := r.st.Ts
	r.mu.Unlock()
	for {
		kvs, err := r.cfg.Reader.Scan(ctx, from, end, ts, r.cfg.ChunkRows)
		if err != nil {
			return fmt.Errorf("snapshot: reading %s (physical table %d) [%x, %x) at ts %d: %w", tb.Name, tb.PhysicalID, from, end, ts, err)
		}
		done := len(kvs) < r.cfg.ChunkRows
		var next []byte
		if !done {
			next = append(append([]byte(nil), kvs[len(kvs)-1].Key...), 0)
		}
		n := chunkBytes(kvs)
		if err := r.acquire(ctx, n); err != nil {
			return err
		}
		if len(kvs) > 0 {
			err = r.cfg.Writer.WriteChunk(ctx, t.Table, kvs)
		}
		r.release(n)
		if err != nil {
			return err
		}
		if err := r.ack(ctx, t, next, uint64(len(kvs)), done); err != nil {
			return err
		}
		if r.cfg.AfterChunk != nil {
			if err := r.cfg.AfterChunk(t, len(kvs)); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
		from = next
	}
}

func chunkBytes(kvs []kvevent.KV) int64 {
	var n int64
	for _, kv := range kvs {
		n += int64(len(kv.Key) + len(kv.Value) + 48)
	}
	return n
}

// acquire charges n bytes to the quota, waiting while other chunks of the
// runner hold it; a chunk alone proceeds past the limit (SN4).
func (r *runner) acquire(ctx context.Context, n int64) error {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	for {
		if r.cfg.Quota.TryAcquire(n) {
			r.heldBytes += n
			return nil
		}
		if r.heldBytes == 0 {
			r.cfg.Quota.Force(n)
			r.heldBytes += n
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		r.held.Wait()
	}
}

func (r *runner) release(n int64) {
	r.heldMu.Lock()
	r.cfg.Quota.Release(n)
	r.heldBytes -= n
	r.heldMu.Unlock()
	r.held.Broadcast()
}

// ack records an acknowledged chunk; the range's last chunk finishes the
// table when it was its last range.
func (r *runner) ack(ctx context.Context, t Task, next []byte, rows uint64, done bool) error {
	r.mu.Lock()
	if err := r.st.Ack(t, next, rows, done); err != nil {
		r.mu.Unlock()
		return err
	}
	name := r.st.Tables[t.Table].Name
	rg := &r.st.Tables[t.Table].Ranges[t.Range]
	frac := rg.readFraction(rg.Next)
	allRead := done && r.st.Tables[t.Table].AllRead()
	err := r.saveLocked(done)
	r.mu.Unlock()
	if r.cfg.Progress != nil {
		r.cfg.Progress.addRows(name, t, rows, done, frac)
	}
	if err != nil {
		return err
	}
	if allRead {
		return r.finish(ctx, t.Table)
	}
	return nil
}

// finish stores table ti's progress at S and records it (SN5).
func (r *runner) finish(ctx context.Context, ti int) error {
	r.mu.Lock()
	rows := r.st.Tables[ti].Rows()
	r.mu.Unlock()
	if err := r.cfg.Writer.FinishTable(ctx, ti, rows); err != nil {
		return err
	}
	r.mu.Lock()
	r.st.Tables[ti].Finished = true
	name := r.st.Tables[ti].Name
	err := r.saveLocked(true)
	r.mu.Unlock()
	if r.cfg.Progress != nil {
		r.cfg.Progress.finish(name, r.cfg.Now())
	}
	return err
}

func (r *runner) save(force bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.saveLocked(force)
}

func (r *runner) saveLocked(force bool) error {
	if r.cfg.Save == nil {
		return nil
	}
	now := r.cfg.Now()
	if !force && now.Sub(r.lastSave) < r.cfg.SaveEvery {
		return nil
	}
	r.lastSave = now
	return r.cfg.Save(r.st)
}
