package text

import "fmt"

// Engine is what the emulator needs of a text index. Two implement it:
// Mem (the default, TXT-M1) and Index (bleve/scorch, kept for the on-disk
// mode and for the side-by-side comparison in specs/emulator-text-vector.md).
type Engine interface {
	Fields() []string
	Apply(ops []Op) error
	Search(queryText string, fields []string, k int, filter func(pk string) bool) ([]Hit, error)
	SearchTotal(queryText string, fields []string, k int, filter func(pk string) bool) ([]Hit, uint64, error)
	SearchAll(queryText string, fields []string, filter func(pk string) bool) ([]Hit, error)
	Terms(queryText string) map[string]bool
	Highlight(s string, terms map[string]bool, pre, post string) (string, bool)
	Count() (uint64, error)
	Segments() (int, error)
	Close() error
}

// Engine names accepted by OpenEngine.
const (
	EngineMem   = "memory"
	EngineBleve = "bleve"
)

var (
	_ Engine = (*Mem)(nil)
	_ Engine = (*Index)(nil)
)

// OpenEngine opens an empty index of the named engine ("" = EngineMem);
// scratchParent is where a bleve index keeps its segment files (TXT-P5).
func OpenEngine(name, scratchParent string, fields []string) (Engine, error) {
	switch name {
	case "", EngineMem:
		return OpenMem(fields)
	case EngineBleve:
		return OpenScratch(scratchParent, fields)
	}
	return nil, fmt.Errorf("text: unknown engine %q (want %q or %q)", name, EngineMem, EngineBleve)
}
