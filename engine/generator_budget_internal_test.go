package engine

import (
	"testing"

	"github.com/cozystack/cozy-aio/source/generate"
)

// TestGeneratorBudget: the generator builds (the reconciler's and the
// rebuilds') share one budget of Options.GeneratorMemoryBytes, zero
// meaning generate's default.
func TestGeneratorBudget(t *testing.T) {
	for bytes, want := range map[int64]int64{0: generate.DefaultMemoryBytes, 64 << 10: 64 << 10, -1: 0} {
		e := &Engine{opts: Options{GeneratorMemoryBytes: bytes}}
		if b := e.generatorMemory(); b != e.generatorMemory() || b.Limit() != want {
			t.Errorf("GeneratorMemoryBytes %d: budget of %d bytes (shared: %v), want %d", bytes, b.Limit(), b == e.generatorMemory(), want)
		}
	}
}
