package generate

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cozystack/cozy-aio/source"
)

// DefaultMemoryBytes is the budget NewBudget(0) gives: 256 MiB.
const DefaultMemoryBytes = 256 << 20

// Budget is the memory that builds share for the files of their outputs.
// Tenants choose what the sources hold, so a build held in memory without
// a bound could take the process down; with one, Build keeps an output in
// memory only while it fits in what the budget has left, and composes it
// again in a temporary directory otherwise (see Build). No build waits for
// another to give memory back: none can deadlock or starve, and the bytes
// held never exceed the limit. A Budget is safe for concurrent use.
type Budget struct {
	limit int64

	mu         sync.Mutex
	used, peak int64
}

// NewBudget returns a budget of limit bytes. Zero means
// DefaultMemoryBytes; a negative limit is none, so that every output is
// composed on disk, as source-watcher composes them.
func NewBudget(limit int64) *Budget {
	switch {
	case limit == 0:
		limit = DefaultMemoryBytes
	case limit < 0:
		limit = 0
	}
	return &Budget{limit: limit}
}

// Limit returns the budget's size in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// InUse returns the bytes the builds in flight hold.
func (b *Budget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Peak returns the most bytes held at once since NewBudget.
func (b *Budget) Peak() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// take reserves n bytes, or none when they do not fit in what is left.
func (b *Budget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return true
}

func (b *Budget) give(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
}

// errOverBudget means an output in memory outgrew what its budget had
// left: Build composes it again on disk. It never reaches Build's caller.
var errOverBudget = errors.New("the output outgrew the memory budget")

// meter counts the bytes of an output's files against the cap on an
// output's size and, for an output in memory, against the budget.
type meter struct {
	max    int64   // the cap; negative: none
	budget *Budget // nil for an output on disk
	total  int64
}

// grow accounts for delta more bytes in the output, fewer when negative.
// The cap is checked first, so that an output too large for any build is
// not composed again on disk only to fail there.
func (m *meter) grow(delta int64) error {
	if delta > 0 && m.max >= 0 && m.total+delta > m.max {
		return fmt.Errorf("%w: the output's files would hold %d bytes, more than the %d an artifact may hold",
			source.ErrTooLarge, m.total+delta, m.max)
	}
	if m.budget != nil {
		if delta < 0 {
			m.budget.give(-delta)
		} else if !m.budget.take(delta) {
			return errOverBudget
		}
	}
	m.total += delta
	return nil
}

// release gives the budget back what the output holds, once its archive is
// written.
func (m *meter) release() {
	if m.budget != nil {
		m.budget.give(m.total)
	}
	m.total = 0
}
