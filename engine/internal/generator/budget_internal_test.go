package generator

import (
	"testing"

	"github.com/cozystack/cozy-aio/source/generate"
)

// TestGeneratorBudget: the generator builds (the reconciler's and the
// rebuilds') share one budget of Options.MemoryBytes (the engine's
// GeneratorMemoryBytes), zero meaning generate's default.
func TestGeneratorBudget(t *testing.T) {
	for bytes, want := range map[int64]int64{0: generate.DefaultMemoryBytes, 64 << 10: 64 << 10, -1: 0} {
		r := &Reconciler{opts: Options{MemoryBytes: bytes}}
		if b := r.generatorMemory(); b != r.generatorMemory() || b.Limit() != want {
			t.Errorf("MemoryBytes %d: budget of %d bytes (shared: %v), want %d", bytes, b.Limit(), b == r.generatorMemory(), want)
		}
	}
}
