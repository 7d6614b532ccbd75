package statuspage

import (
	"bufio"
	"encoding/json"
	"net/http"
	"time"
)

// Change is one batch of changes pushed to a live client (server-sent
// event "change"): the objects changed since the last batch, as they are
// now, the ones gone, and the counts per kind.
type Change struct {
	Version uint64      `json:"version"`
	Objects []*Object   `json:"objects"`
	Removed []Ref       `json:"removed"`
	Kinds   []KindCount `json:"kinds"`
}

// Timings of the live stream.
var (
	// coalesce gathers the changes of a burst into one batch.
	coalesce = 200 * time.Millisecond
	// heartbeat keeps proxies from closing an idle stream.
	heartbeat = 20 * time.Second
	// writeTimeout drops a client that does not read: its buffer and
	// its pending changes go with it.
	writeTimeout = 10 * time.Second
)

// watchEvents streams changes as server-sent events. What a connection
// holds is bounded: at most maxDirty pending refs (past them one "reset"
// event tells the client to reload), and a write that does not finish in
// writeTimeout ends it.
func (s *Server) watchEvents(w http.ResponseWriter, r *http.Request) {
	if n := s.watchers.Add(1); n > maxWatchers {
		s.watchers.Add(-1)
		fail(w, http.StatusServiceUnavailable, "too many live clients (%d): try again later", maxWatchers)
		return
	}
	defer s.watchers.Add(-1)
	rc := http.NewResponseController(w)
	// The server's read timeout would end the stream (its background
	// read cancels the request): a live stream reads nothing more.
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sub := s.idx.subscribe()
	defer s.idx.unsubscribe(sub)
	ctx := r.Context()
	v := viewerOf(r)
	bw := bufio.NewWriterSize(w, 32<<10)
	send := func(event string, data any) bool {
		b, err := json.Marshal(data)
		if err != nil {
			return false
		}
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		bw.WriteString("event: " + event + "\ndata: ")
		bw.Write(b)
		bw.WriteString("\n\n")
		if bw.Flush() != nil {
			return false
		}
		return rc.Flush() == nil
	}
	_, version := s.idx.counts(func(Ref) bool { return false })
	if !send("hello", map[string]uint64{"version": version}) {
		return
	}
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
			if _, err := bw.WriteString(": beat\n\n"); err != nil || bw.Flush() != nil || rc.Flush() != nil {
				return
			}
			continue
		case <-sub.wake:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(coalesce):
		}
		refs, overflow := sub.take()
		if overflow {
			if !send("reset", map[string]string{}) {
				return
			}
			s.countUpdate()
			continue
		}
		if len(refs) == 0 {
			continue
		}
		visible := v.visible(ctx)
		c := Change{Objects: []*Object{}, Removed: []Ref{}}
		for _, ref := range refs {
			if !visible(ref) {
				continue
			}
			if o, ok := s.idx.get(ref); ok {
				c.Objects = append(c.Objects, o)
			} else {
				c.Removed = append(c.Removed, ref)
			}
		}
		if len(c.Objects) == 0 && len(c.Removed) == 0 {
			continue
		}
		c.Kinds, c.Version = s.idx.counts(visible)
		sortObjects(c.Objects)
		if !send("change", c) {
			return
		}
		s.countUpdate()
	}
}

func (s *Server) countUpdate() {
	s.idx.mu.Lock()
	s.idx.updates++
	s.idx.mu.Unlock()
}
