package emulator

import (
	"sync"

	"github.com/searchfabric/sfemu/emulator/text"
)

// textSlot is a collection's text index as searches see it. The engine
// behind it is replaced at most once, when an in-memory index passes its
// budget and is rebuilt on disk (TXT-M7): searches hold the read lock for
// their whole call, the swap takes the write lock for one pointer store,
// so every search is answered by one complete index, the old one until the
// swap and the new one after.
type textSlot struct {
	mu  sync.RWMutex
	eng text.Engine
}

var _ text.Engine = (*textSlot)(nil)

func (s *textSlot) current() text.Engine {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.eng
}

// swap installs next and returns the engine it replaced.
func (s *textSlot) swap(next text.Engine) text.Engine {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.eng
	s.eng = next
	return old
}

// engineName and memBytes describe the slot for metrics and tests.
func (s *textSlot) engineName() (string, int64) {
	if m, ok := s.current().(*text.Mem); ok {
		return text.EngineMem, m.Bytes()
	}
	return text.EngineBleve, 0
}

func (s *textSlot) Fields() []string { return s.current().Fields() }

func (s *textSlot) Apply(ops []text.Op) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.eng.Apply(ops)
}

func (s *textSlot) Search(q string, fields []string, k int, filter func(pk string) bool) ([]text.Hit, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.eng.Search(q, fields, k, filter)
}

func (s *textSlot) SearchTotal(q string, fields []string, k int, filter func(pk string) bool) ([]text.Hit, uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.eng.SearchTotal(q, fields, k, filter)
}

func (s *textSlot) SearchAll(q string, fields []string, filter func(pk string) bool) ([]text.Hit, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.eng.SearchAll(q, fields, filter)
}

func (s *textSlot) Terms(q string) map[string]bool { return s.current().Terms(q) }

func (s *textSlot) Highlight(str string, terms map[string]bool, pre, post string) (string, bool) {
	return s.current().Highlight(str, terms, pre, post)
}

func (s *textSlot) Count() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.eng.Count()
}

func (s *textSlot) Segments() (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.eng.Segments()
}

func (s *textSlot) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eng.Close()
}

// TextEngine reports which engine serves a collection's text searches
// (text.EngineMem or text.EngineBleve, TXT-M7) and the accounted bytes of
// an in-memory one (TXT-M6); ok is false when the collection has no text
// index.
func (e *Emulator) TextEngine(collection string) (engine string, memBytes int64, ok bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	c := e.colls[collection]
	if c == nil || !c.active() {
		return "", 0, false
	}
	slot, ok := c.serving().textIdx.(*textSlot)
	if !ok {
		return "", 0, false
	}
	engine, memBytes = slot.engineName()
	return engine, memBytes, true
}
