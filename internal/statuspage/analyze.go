package statuspage

import (
	"sort"
	"time"

	"github.com/cozystack/cozy-aio/internal/status"
)

// Link is one object on a chain the page explains: a "why" line or the
// critical path.
type Link struct {
	Ref
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Waiting is how long the object has not been Ready, in seconds; 0
	// when it is Ready or the time is unknown.
	Waiting float64 `json:"waiting,omitempty"`
	// Missing is set when the object does not exist.
	Missing bool `json:"missing,omitempty"`
}

// maxChain bounds a chain: a cycle or a very deep graph ends there.
const maxChain = 64

func linkOf(o *Object, now time.Time) Link {
	l := Link{Ref: o.Ref, State: o.State, Reason: o.Reason, Message: o.Message}
	if o.State != StateReady && !o.Since.IsZero() {
		l.Waiting = now.Sub(o.Since).Round(time.Second).Seconds()
	}
	return l
}

// blockers are what keeps o from being Ready: its dependencies that are
// not Ready (or missing), then its sources that are not.
func blockers(o *Object, get func(Ref) (*Object, bool)) []Ref {
	var out []Ref
	for _, group := range [][]Ref{o.DependsOn, o.Sources} {
		for _, r := range group {
			d, ok := get(r)
			if !ok && kindOrder(r.Kind) == len(status.Kinds) {
				// A kind the page does not index (HelmChart, Bucket):
				// not known to block.
				continue
			}
			if !ok || d.State != StateReady {
				out = append(out, r)
			}
		}
	}
	return out
}

// why follows an object that is not Ready to the root cause: from each
// object to the first of its dependencies or sources that is not Ready,
// until one that waits on nothing ("source failed → artifact missing →
// HelmRelease waiting", read from the last link back). The first link is
// the object itself.
func why(start Ref, get func(Ref) (*Object, bool), now time.Time) []Link {
	var out []Link
	seen := map[Ref]bool{}
	cur := start
	for len(out) < maxChain && !seen[cur] {
		seen[cur] = true
		o, ok := get(cur)
		if !ok {
			out = append(out, Link{Ref: cur, Missing: true, State: "missing", Message: cur.String() + " does not exist"})
			break
		}
		out = append(out, linkOf(o, now))
		if o.State == StateReady || o.State == StateSuspended {
			break
		}
		next := blockers(o, get)
		if len(next) == 0 {
			break
		}
		cur = next[0]
	}
	return out
}

// criticalPath is the longest chain of objects that are not Ready, each
// waiting on the next: the chain whose root, once Ready, unblocks the
// most waiting. It starts at the object that waits longest in chain
// length and ends at the root cause.
func criticalPath(objs []*Object, get func(Ref) (*Object, bool), now time.Time) []Link {
	depth := map[Ref]int{}
	next := map[Ref]Ref{}
	const visiting = -1
	var walk func(r Ref, n int) int
	walk = func(r Ref, n int) int {
		if d, ok := depth[r]; ok {
			if d == visiting {
				return 0 // a cycle: cut here
			}
			return d
		}
		o, ok := get(r)
		if !ok {
			depth[r] = 1
			return 1
		}
		if o.State == StateReady || o.State == StateSuspended {
			depth[r] = 0
			return 0
		}
		depth[r] = visiting
		best, bestRef := 0, Ref{}
		if n < maxChain {
			for _, b := range blockers(o, get) {
				if d := walk(b, n+1); d > best {
					best, bestRef = d, b
				}
			}
		}
		if best > 0 {
			next[r] = bestRef
		}
		depth[r] = best + 1
		return best + 1
	}
	var top Ref
	topDepth := 0
	for _, o := range objs {
		if o.State == StateReady || o.State == StateSuspended {
			continue
		}
		if d := walk(o.Ref, 0); d > topDepth {
			top, topDepth = o.Ref, d
		}
	}
	if topDepth < 2 {
		// One object alone is not a chain; the failures list shows it.
		return nil
	}
	var out []Link
	for r, ok := top, true; ok && len(out) < maxChain; r, ok = next[r] {
		if o, found := get(r); found {
			out = append(out, linkOf(o, now))
		} else {
			out = append(out, Link{Ref: r, Missing: true, State: "missing", Message: r.String() + " does not exist"})
		}
	}
	return out
}

// KindCount counts one kind's objects by state.
type KindCount struct {
	Kind        string `json:"kind"`
	Ready       int    `json:"ready"`
	Progressing int    `json:"progressing"`
	Failed      int    `json:"failed"`
	Suspended   int    `json:"suspended"`
	Total       int    `json:"total"`
}

func countKinds(objs []*Object) []KindCount {
	out := make([]KindCount, len(status.Kinds))
	for i, k := range status.Kinds {
		out[i].Kind = k
	}
	for _, o := range objs {
		i := kindOrder(o.Kind)
		if i >= len(out) {
			continue
		}
		out[i].add(o.State)
	}
	return out
}

func (c *KindCount) add(state string) {
	c.Total++
	switch state {
	case StateReady:
		c.Ready++
	case StateFailed:
		c.Failed++
	case StateSuspended:
		c.Suspended++
	default:
		c.Progressing++
	}
}

// Failure is an object that failed, with the chain to its root cause.
type Failure struct {
	Object *Object `json:"object"`
	Why    []Link  `json:"why"`
}

// maxFailures caps the failures an overview lists; the count is complete.
const maxFailures = 50

// failures lists the failed objects, the longest failing first, with
// their "why" chains.
func failures(objs []*Object, get func(Ref) (*Object, bool), now time.Time) ([]Failure, int) {
	var failed []*Object
	for _, o := range objs {
		if o.State == StateFailed {
			failed = append(failed, o)
		}
	}
	sort.SliceStable(failed, func(i, j int) bool { return failed[i].Since.Before(failed[j].Since) })
	out := []Failure{}
	for i, o := range failed {
		if i == maxFailures {
			break
		}
		out = append(out, Failure{Object: o, Why: why(o.Ref, get, now)})
	}
	return out, len(failed)
}
