package schemafence

import (
	"encoding/binary"
	"testing"
)

// FuzzPlanCursor: for any batch the plan never panics, never moves the
// cursor back, emits only events at or below the fence, and adopts next
// only when the whole batch was emitted (specs/minicdc.md M31, M32).
func FuzzPlanCursor(f *testing.F) {
	f.Add(uint64(100), []byte{0, 0, 0, 0, 0, 0, 0, 110, 0, 0, 0, 0, 0, 0, 0, 120}, uint64(130), uint64(115), true)
	f.Add(uint64(0), []byte{}, uint64(5), uint64(5), true)
	f.Fuzz(func(t *testing.T, cursor uint64, raw []byte, next, fence uint64, ok bool) {
		var finished []uint64
		for len(raw) >= 8 {
			finished = append(finished, binary.BigEndian.Uint64(raw))
			raw = raw[8:]
		}
		p, err := PlanCursor(cursor, finished, next, fence, ok)
		if p.Cursor < cursor {
			t.Fatalf("cursor moved back: %d -> %d", cursor, p.Cursor)
		}
		if err != nil {
			if p.Emit != 0 || p.Cursor != cursor {
				t.Fatalf("error plan changed state: %+v", p)
			}
			return
		}
		if p.Emit > len(finished) {
			t.Fatalf("emit %d of %d", p.Emit, len(finished))
		}
		for _, ts := range finished[:p.Emit] {
			if !ok || ts > fence {
				t.Fatalf("emitted %d above fence %d (ok=%v)", ts, fence, ok)
			}
		}
		if p.AdoptedNext && (p.Emit != len(finished) || next > fence || p.Cursor != next) {
			t.Fatalf("next adopted wrongly: %+v", p)
		}
		if !p.AdoptedNext && p.Emit > 0 && p.Cursor != finished[p.Emit-1] {
			t.Fatalf("cursor %d is not the last emitted event %d", p.Cursor, finished[p.Emit-1])
		}
	})
}
