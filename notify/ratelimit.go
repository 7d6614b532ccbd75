package notify

import (
	"crypto/sha256"
	"sync"
	"time"
)

// limiter lets the same event through once per interval. It holds a digest
// per key, at most max of them: when full it forgets the expired ones, and
// if none expired, the oldest half, so a flood of distinct events cannot
// grow it without bound.
type limiter struct {
	interval time.Duration
	max      int
	now      func() time.Time

	mu   sync.Mutex
	seen map[[sha256.Size]byte]time.Time
}

func newLimiter(interval time.Duration, max int) *limiter {
	return &limiter{interval: interval, max: max, now: time.Now, seen: map[[sha256.Size]byte]time.Time{}}
}

// allow reports whether key may pass now, and records it when it does.
func (l *limiter) allow(key string) bool {
	if l.interval <= 0 {
		return true
	}
	d := sha256.Sum256([]byte(key))
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if until, ok := l.seen[d]; ok && now.Before(until) {
		return false
	}
	if len(l.seen) >= l.max {
		l.prune(now)
	}
	l.seen[d] = now.Add(l.interval)
	return true
}

func (l *limiter) prune(now time.Time) {
	for k, until := range l.seen {
		if !now.Before(until) {
			delete(l.seen, k)
		}
	}
	if len(l.seen) < l.max {
		return
	}
	// Every entry is live: drop those expiring soonest.
	cut := now.Add(l.interval / 2)
	for k, until := range l.seen {
		if until.Before(cut) {
			delete(l.seen, k)
		}
	}
	if len(l.seen) >= l.max {
		clear(l.seen)
	}
}
