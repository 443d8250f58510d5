package minicdc

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/mounter"
	"github.com/searchfabric/sfemu/upstream/schemastore"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// Scripted fakes of the runtime's seams. They record every call in one
// shared journal so tests can assert the startup and shutdown order.

type journal struct {
	mu    sync.Mutex
	calls []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	j.calls = append(j.calls, fmt.Sprintf(format, args...))
	j.mu.Unlock()
}

func (j *journal) take() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := j.calls
	j.calls = nil
	return out
}

func (j *journal) all() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.calls...)
}

// fakeTime is virtual time that moves forward by d on every After(d), so
// bounded waits run to their deadline instantly and deterministically.
type fakeTime struct {
	mu  sync.Mutex
	now time.Time
	// frozen makes After never fire: waits end only on their other
	// signals (progress, cancellation).
	frozen bool
	// stepped makes After fire only when the test fires it (fireShort),
	// so a test sees which waits the runtime asked for.
	stepped bool
	timers  []steppedTimer
	calls   int // After calls so far
}

func newFakeTime() *fakeTime { return &fakeTime{now: time.Unix(1_700_000_000, 0)} }

func (f *fakeTime) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeTime) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	ch := make(chan time.Time, 1)
	if f.stepped {
		f.timers = append(f.timers, steppedTimer{d, ch})
		return ch
	}
	if f.frozen {
		return ch
	}
	f.now = f.now.Add(d)
	ch <- f.now
	return ch
}

func (f *fakeTime) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

type fakeClock struct {
	ts  uint64
	err error
}

func (c *fakeClock) CurrentTs(context.Context) (uint64, error) { return c.ts, c.err }

type tableVersion struct {
	ts uint64
	ti *model.TableInfo
}

// fakeStore is a scripted schema store. Its resolved ts is one value for
// every table; DDL events are kept sorted by FinishedTs and handed out as
// sub-slices of its own array, so pointer identity can be checked.
type fakeStore struct {
	j  *journal
	mu sync.Mutex

	registered bool
	resolved   uint64
	// resolvedStep, when > 0, raises resolved by that much on every
	// GetTableDDLEventState call (a store catching up).
	resolvedStep uint64
	versions     map[int64][]tableVersion
	ddls         []schemastore.DDLEvent

	errRegisterKeyspace error
	errRegisterTable    map[int64]error
	errState            error
	fetchErrs           []error // returned one by one before succeeding
	closed              bool
	closeErr            error
	// fetchOverride replaces the fetch result (contract-violation tests).
	fetchOverride func(start uint64, limit int) ([]schemastore.DDLEvent, uint64, error)
}

func newFakeStore(j *journal) *fakeStore {
	return &fakeStore{j: j, versions: map[int64][]tableVersion{}, errRegisterTable: map[int64]error{}}
}

func tableInfo(id int64, ts uint64) *model.TableInfo {
	name := fmt.Sprintf("t%d@%d", id, ts)
	return &model.TableInfo{ID: id, Name: model.CIStr{O: name, L: name}}
}

func (s *fakeStore) addVersion(id int64, ts uint64) *model.TableInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	ti := tableInfo(id, ts)
	s.versions[id] = append(s.versions[id], tableVersion{ts: ts, ti: ti})
	sort.Slice(s.versions[id], func(a, b int) bool { return s.versions[id][a].ts < s.versions[id][b].ts })
	return ti
}

func (s *fakeStore) addDDL(ev schemastore.DDLEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ddls = append(s.ddls, ev)
	sort.SliceStable(s.ddls, func(a, b int) bool { return s.ddls[a].FinishedTs < s.ddls[b].FinishedTs })
}

func (s *fakeStore) setResolved(ts uint64) {
	s.mu.Lock()
	s.resolved = ts
	s.mu.Unlock()
}

func (s *fakeStore) RegisterKeyspace(ctx context.Context, ks uint32) error {
	s.j.add("store.RegisterKeyspace(%d)", ks)
	if ctx.Err() != nil {
		return errors.New("RegisterKeyspace given a dead context")
	}
	if s.errRegisterKeyspace != nil {
		return s.errRegisterKeyspace
	}
	s.mu.Lock()
	s.registered = true
	s.mu.Unlock()
	return nil
}

var errNotRegistered = errors.New("fake store: schema API called before RegisterKeyspace")

func (s *fakeStore) GetTableDDLEventState(id int64) (schemastore.DDLEventState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.registered {
		return schemastore.DDLEventState{}, errNotRegistered
	}
	if s.errState != nil {
		return schemastore.DDLEventState{}, s.errState
	}
	s.resolved += s.resolvedStep
	return schemastore.DDLEventState{ResolvedTs: s.resolved}, nil
}

func (s *fakeStore) RegisterTable(id int64, ts uint64) error {
	s.j.add("store.RegisterTable(%d,%d)", id, ts)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.registered {
		return errNotRegistered
	}
	if ts > s.resolved {
		return fmt.Errorf("fake store: RegisterTable(%d,%d) before resolved (%d) reached it", id, ts, s.resolved)
	}
	return s.errRegisterTable[id]
}

func (s *fakeStore) GetTableInfo(id int64, ts uint64) (*model.TableInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.registered {
		return nil, errNotRegistered
	}
	if ts > s.resolved {
		return nil, fmt.Errorf("fake store: not ready: table %d ts %d > resolved %d", id, ts, s.resolved)
	}
	vs := s.versions[id]
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].ts <= ts {
			if vs[i].ti == nil {
				return nil, fmt.Errorf("fake store: table %d dropped at %d", id, vs[i].ts)
			}
			return vs[i].ti, nil
		}
	}
	return nil, fmt.Errorf("fake store: table %d has no version at ts %d", id, ts)
}

func (s *fakeStore) FetchTableTriggerDDLEvents(start uint64, limit int) ([]schemastore.DDLEvent, uint64, error) {
	s.j.add("store.Fetch(%d,%d)", start, limit)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.registered {
		return nil, 0, errNotRegistered
	}
	if len(s.fetchErrs) > 0 {
		err := s.fetchErrs[0]
		s.fetchErrs = s.fetchErrs[1:]
		return nil, 0, err
	}
	if s.fetchOverride != nil {
		return s.fetchOverride(start, limit)
	}
	lo := sort.Search(len(s.ddls), func(i int) bool { return s.ddls[i].FinishedTs > start })
	hi := lo
	for hi < len(s.ddls) && s.ddls[hi].FinishedTs <= s.resolved {
		hi++
	}
	if hi-lo < limit {
		return s.ddls[lo:hi:hi], max(start, s.resolved), nil
	}
	// Like the real store: never end a batch inside a group of equal
	// FinishedTs; a first group longer than limit comes whole.
	cut := lo + limit
	if cut < hi {
		for cut > lo && s.ddls[cut-1].FinishedTs == s.ddls[cut].FinishedTs {
			cut--
		}
		if cut == lo {
			cut = lo + limit
			for cut < hi && s.ddls[cut].FinishedTs == s.ddls[lo+limit-1].FinishedTs {
				cut++
			}
		}
	}
	out := s.ddls[lo:cut:cut]
	return out, out[len(out)-1].FinishedTs, nil
}

func (s *fakeStore) Close() error {
	s.j.add("store.Close")
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return s.closeErr
}

// fakeSource hands each subscription's consumer to the test, which then
// calls ConsumeKV/AdvanceResolvedTs directly (as the real source's delivery
// goroutine would).
type fakeSource struct {
	j  *journal
	mu sync.Mutex

	consumers map[int64]kvevent.Consumer
	// initialResolved, when set, reports this resolved ts from inside
	// Subscribe (the fake's "initialized" signal).
	initialResolved func(table int64, startTs uint64) (uint64, bool)
	errSubscribe    map[int64]error
	runErr          chan error // a value makes Run return it
	running         chan struct{}
	closed          bool
	runReturned     bool
}

func newFakeSource(j *journal) *fakeSource {
	return &fakeSource{j: j, consumers: map[int64]kvevent.Consumer{}, errSubscribe: map[int64]error{},
		runErr: make(chan error, 1), running: make(chan struct{})}
}

func spanOf(_ uint32, _ bool, id int64) (kvevent.Span, error) {
	return kvevent.Span{StartKey: []byte(fmt.Sprintf("t%d_r", id)), EndKey: []byte(fmt.Sprintf("t%d_s", id))}, nil
}

func (s *fakeSource) Subscribe(ctx context.Context, subID uint64, span kvevent.Span, startTs uint64, c kvevent.Consumer) error {
	id, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(string(span.StartKey), "t"), "_r"), 10, 64)
	if err != nil {
		return err
	}
	s.j.add("source.Subscribe(%d,%s,%d)", id, span.StartKey, startTs)
	if err := s.errSubscribe[id]; err != nil {
		return err
	}
	s.mu.Lock()
	init := s.initialResolved
	s.mu.Unlock()
	if init != nil {
		if ts, ok := init(id, startTs); ok {
			c.AdvanceResolvedTs(ts)
		}
	}
	// The consumer is published only after the initial report: a real
	// source delivers to one span on one goroutine (kvevent.Consumer), so a
	// test that drives the consumer must not overlap that first call.
	s.mu.Lock()
	s.consumers[id] = c
	s.mu.Unlock()
	return nil
}

func (s *fakeSource) consumer(id int64) kvevent.Consumer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.consumers[id]
}

func (s *fakeSource) Run(ctx context.Context) error {
	s.j.add("source.Run")
	close(s.running)
	select {
	case <-ctx.Done():
		s.mu.Lock()
		s.runReturned = true
		s.mu.Unlock()
		s.j.add("source.Run returned")
		return nil
	case err := <-s.runErr:
		s.mu.Lock()
		s.runReturned = true
		s.mu.Unlock()
		s.j.add("source.Run returned %v", err)
		return err
	}
}

func (s *fakeSource) Close() error {
	s.mu.Lock()
	returned := s.runReturned
	s.closed = true
	s.mu.Unlock()
	s.j.add("source.Close(runReturned=%v)", returned)
	return nil
}

// fakeDecoder classifies like the mounter (delete; put with old value =
// update; put without = insert; neither value = nothing) and understands
// two magic values: "corrupt" (decode error) and "update-noold" (an update
// classification without old value).
type fakeDecoder struct{}

type missingOldValueErr struct{}

func (missingOldValueErr) Error() string         { return "update without old value" }
func (missingOldValueErr) MissingOldValue() bool { return true }

func (fakeDecoder) Decode(e *kvevent.RawKVEntry, ti *model.TableInfo, out *DecodedRow) error {
	if ti == nil {
		return errors.New("nil table info")
	}
	switch string(e.Value) {
	case "corrupt":
		return fmt.Errorf("row value: bad column id at offset 3")
	case "mounter-noold":
		return missingOldValueErr{}
	}
	out.RowKey = append([]byte(nil), e.Key...)
	if strings.HasPrefix(string(e.Key), "other-table") {
		out.TableID = 99
	}
	switch {
	case e.OpType == kvevent.OpTypeDelete:
		out.RowType = mounter.RowTypeDelete
		out.HandleOnly = len(e.OldValue) == 0
	case len(e.Value) == 0 && len(e.OldValue) == 0:
		out.RowType = mounter.RowTypeUnknown
	case len(e.OldValue) > 0 || string(e.Value) == "update-noold":
		out.RowType = mounter.RowTypeUpdate
	default:
		out.RowType = mounter.RowTypeInsert
	}
	return nil
}

// recorder is the Callback: it logs every call and can be told to fail.
type recorder struct {
	mu  sync.Mutex
	log []string

	failRowKey     string // OnRowChanged for this key fails
	failRowErr     error
	failDDLTs      uint64
	failCheckpoint bool

	tableInfos []*TableInfo
	ddlEvents  []DDL
	cps        []Checkpoint
	onRow      func(ev RowChanged)
	onDDL      func(ev DDL)
	// afterDDL runs after OnDDL logged the event (scripts apply table-set
	// changes there); an error it returns is OnDDL's.
	afterDDL func(ev DDL) error
}

// note appends a line to the callback log.
func (c *recorder) note(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, fmt.Sprintf(format, args...))
}

func (c *recorder) OnRowChanged(ctx context.Context, ev RowChanged) error {
	if c.onRow != nil {
		c.onRow(ev)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, fmt.Sprintf("row table=%d commit=%d %s key=%s schema=%s", ev.TableID, ev.CommitTs, ev.RowType, ev.RowKey, ev.TableInfo.Name.O))
	c.tableInfos = append(c.tableInfos, ev.TableInfo)
	if c.failRowKey != "" && string(ev.RowKey) == c.failRowKey {
		if c.failRowErr != nil {
			return c.failRowErr
		}
		return errors.New("sink rejected the row")
	}
	return nil
}

func (c *recorder) OnDDL(ctx context.Context, ev DDL) error {
	if c.onDDL != nil {
		c.onDDL(ev)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, fmt.Sprintf("ddl finished=%d table=%d job=%d %s", ev.FinishedTs, ev.TableID, ev.JobID, ev.Query))
	c.ddlEvents = append(c.ddlEvents, ev)
	if c.failDDLTs != 0 && ev.FinishedTs == c.failDDLTs {
		return errors.New("sink rejected the schema change")
	}
	if after := c.afterDDL; after != nil {
		c.mu.Unlock()
		defer c.mu.Lock()
		return after(ev)
	}
	return nil
}

func (c *recorder) OnCheckpoint(ctx context.Context, cp Checkpoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]int64, 0, len(cp.TableResolvedTs))
	for id := range cp.TableResolvedTs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	var b strings.Builder
	fmt.Fprintf(&b, "checkpoint global=%d", cp.GlobalResolvedTs)
	for _, id := range ids {
		fmt.Fprintf(&b, " t%d=%d", id, cp.TableResolvedTs[id])
	}
	c.log = append(c.log, b.String())
	c.cps = append(c.cps, cp)
	if c.failCheckpoint {
		return errors.New("sink rejected the checkpoint")
	}
	return nil
}

func (c *recorder) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.log
	c.log = nil
	return out
}

// harness bundles the fakes for one runtime.
type harness struct {
	j     *journal
	store *fakeStore
	src   *fakeSource
	clock *fakeClock
	tm    *fakeTime
	cb    *recorder
	deps  Deps
	opts  Options
}

func newHarness() *harness {
	j := &journal{}
	h := &harness{j: j, store: newFakeStore(j), src: newFakeSource(j), clock: &fakeClock{ts: 1000}, tm: newFakeTime(), cb: &recorder{}}
	h.deps = Deps{
		Clock:       h.clock,
		SchemaStore: h.store,
		Source:      h.src,
		NewDecoder:  func(int64) (RowDecoder, error) { return fakeDecoder{}, nil },
		TableSpan:   spanOf,
		Time:        h.tm,
	}
	h.opts = Options{manualControl: true}
	// By default every table reports its start ts once subscribed.
	h.src.initialResolved = func(_ int64, startTs uint64) (uint64, bool) { return startTs, true }
	return h
}

// prepare gives each table a schema version at ts 0 and sets the store's
// resolved ts.
func (h *harness) prepare(resolved uint64, tables ...int64) {
	for _, id := range tables {
		h.store.addVersion(id, 0)
	}
	h.store.setResolved(resolved)
}

// start starts a runtime and makes sure the test closes it, so a failing
// test cannot leave the process slot (M8) held for the next one.
func (h *harness) start(t testing.TB, cfg StartConfig) (*Runtime, error) {
	rt, err := Start(context.Background(), cfg, h.deps, h.cb, h.opts)
	if rt != nil {
		t.Cleanup(func() { _ = rt.Close() })
	}
	return rt, err
}

func put(key string, commit uint64, value string) kvevent.RawKVEntry {
	return kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: []byte(key), Value: []byte(value), StartTs: commit - 1, CRTs: commit}
}
