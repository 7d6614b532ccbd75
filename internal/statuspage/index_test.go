package statuspage

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func obj(kind, ns, name, state string, deps ...Ref) *Object {
	return &Object{Ref: Ref{kind, ns, name}, State: state, Since: time.Now().Add(-time.Minute), DependsOn: deps}
}

func getterOf(objs ...*Object) func(Ref) (*Object, bool) {
	m := map[Ref]*Object{}
	for _, o := range objs {
		m[o.Ref] = o
	}
	return func(r Ref) (*Object, bool) { o, ok := m[r]; return o, ok }
}

// The "why" line follows dependencies, then sources, to the root cause,
// and stops at a cycle.
func TestWhyFollowsTheChain(t *testing.T) {
	git := obj("GitRepository", "ns", "src", StateFailed)
	app := obj("Kustomization", "ns", "app", StateProgressing)
	app.Sources = []Ref{git.Ref}
	top := obj("HelmRelease", "ns", "top", StateProgressing, Ref{"HelmRelease", "ns", "mid"})
	mid := obj("HelmRelease", "ns", "mid", StateProgressing, app.Ref)
	mid.Kind = "HelmRelease"
	get := getterOf(git, app, top, mid)
	w := why(top.Ref, get, time.Now())
	var names []string
	for _, l := range w {
		names = append(names, l.Name)
	}
	if got := strings.Join(names, ","); got != "top,mid,app,src" {
		t.Fatalf("why: %s", got)
	}
	if w[0].Waiting < 59 {
		t.Fatalf("waiting %v, want about 60 s", w[0].Waiting)
	}
	if line := WhyLine(w); !strings.HasPrefix(line, "GitRepository/ns/src failed") {
		t.Fatalf("whyLine: %s", line)
	}

	a := obj("Kustomization", "ns", "a", StateProgressing, Ref{"Kustomization", "ns", "b"})
	b := obj("Kustomization", "ns", "b", StateProgressing, Ref{"Kustomization", "ns", "a"})
	if w := why(a.Ref, getterOf(a, b), time.Now()); len(w) != 2 {
		t.Fatalf("a cycle: %+v", w)
	}
	gone := obj("Kustomization", "ns", "c", StateProgressing, Ref{"Kustomization", "ns", "gone"})
	if w := why(gone.Ref, getterOf(gone), time.Now()); len(w) != 2 || !w[1].Missing {
		t.Fatalf("a missing dependency: %+v", w)
	}
}

// The critical path is the longest chain of objects not Ready, the root
// cause last; Ready objects end chains.
func TestCriticalPath(t *testing.T) {
	root := obj("Kustomization", "ns", "cni", StateProgressing)
	a := obj("HelmRelease", "ns", "a", StateProgressing, root.Ref)
	b := obj("HelmRelease", "ns", "b", StateProgressing, a.Ref)
	c := obj("HelmRelease", "ns", "c", StateProgressing, b.Ref)
	ready := obj("HelmRelease", "ns", "ok", StateReady)
	side := obj("HelmRelease", "ns", "side", StateProgressing, ready.Ref)
	objs := []*Object{root, a, b, c, ready, side}
	p := criticalPath(objs, getterOf(objs...), time.Now())
	var names []string
	for _, l := range p {
		names = append(names, l.Name)
	}
	if got := strings.Join(names, ","); got != "c,b,a,cni" {
		t.Fatalf("critical path: %s", got)
	}
	for _, o := range objs {
		o.State = StateReady
	}
	if p := criticalPath(objs, getterOf(objs...), time.Now()); p != nil {
		t.Fatalf("all Ready, yet a path: %+v", p)
	}
}

// A subscriber never holds more than maxDirty refs: past it, one reset.
func TestSubscriberIsBounded(t *testing.T) {
	x := newIndex()
	s := x.subscribe()
	for i := range 3 * maxDirty {
		x.set(obj("HelmRelease", "ns", fmt.Sprint("r", i), StateReady))
	}
	if n := s.pending(); n > maxDirty {
		t.Fatalf("%d pending refs, bound %d", n, maxDirty)
	}
	if _, overflow := s.take(); !overflow {
		t.Fatal("no reset after an overflow")
	}
	failed := obj("HelmRelease", "ns", "r0", StateFailed)
	x.set(failed)
	if refs, overflow := s.take(); overflow || len(refs) != 1 {
		t.Fatalf("after the reset: %v %v", refs, overflow)
	}
	// The same state again is no change.
	again := *failed
	x.set(&again)
	if refs, _ := s.take(); len(refs) != 0 {
		t.Fatalf("an unchanged object was sent: %v", refs)
	}
}

// The timeline keeps at most timelineCap entries and nothing older than
// an hour.
func TestTimelineIsBounded(t *testing.T) {
	x := newIndex()
	now := time.Now()
	x.now = func() time.Time { return now.Add(-2 * time.Hour) }
	x.set(obj("HelmRelease", "ns", "old", StateReady))
	x.now = func() time.Time { return now }
	for i := range timelineCap + 10 {
		state := StateReady
		if i%2 == 1 {
			state = StateFailed
		}
		x.set(obj("HelmRelease", "ns", "flap", state))
	}
	all := x.Timeline(time.Time{}, func(Ref) bool { return true })
	if len(all) != timelineCap {
		t.Fatalf("%d entries, want %d", len(all), timelineCap)
	}
	for _, e := range all {
		if e.Name == "old" {
			t.Fatal("an entry older than an hour")
		}
	}
}

// A client that connects to the live stream and never reads is dropped
// after writeTimeout, and holds at most maxDirty refs until then.
func TestSlowClientIsDropped(t *testing.T) {
	writeTimeout = time.Second
	coalesce = time.Millisecond
	defer func() { writeTimeout, coalesce = 10*time.Second, 200*time.Millisecond }()
	s := &Server{idx: newIndex()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(context.WithValue(r.Context(), viewerKey{}, &viewer{all: true}))
		s.watchEvents(w, r)
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A small receive buffer, so that the server's writes block soon.
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	// Wait for the handler to subscribe.
	for s.watchers.Load() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	big := strings.Repeat("x", maxMessage)
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; s.watchers.Load() > 0; i++ {
		if time.Now().After(deadline) {
			t.Fatal("a client that never reads was never dropped")
		}
		o := obj("HelmRelease", "ns", fmt.Sprint("r", i%20000), StateReady)
		o.Message = big + fmt.Sprint(i)
		s.idx.set(o)
		s.idx.mu.RLock()
		for sub := range s.idx.subs {
			if n := sub.pending(); n > maxDirty {
				t.Errorf("%d refs pending, bound %d", n, maxDirty)
			}
		}
		s.idx.mu.RUnlock()
		if i%100 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	s.idx.mu.RLock()
	n := len(s.idx.subs)
	s.idx.mu.RUnlock()
	if n != 0 {
		t.Fatalf("%d subscribers left after the client was dropped", n)
	}
	_ = bufio.NewReader(conn)
}

// A list query rejects what it cannot read.
func TestParseList(t *testing.T) {
	for q, ok := range map[string]bool{
		"": true, "kind=HelmRelease&state=failed&limit=10&continue=20": true,
		"kind=Pod": false, "state=x": false, "limit=0": false, "limit=501": false, "continue=x": false,
		"q=" + strings.Repeat("a", 300): false,
	} {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/objects?"+q, nil)
		if _, err := parseList(r); (err == nil) != ok {
			t.Errorf("%q: err %v, want ok=%v", q, err, ok)
		}
	}
}

// A live stream outlives the server's read timeout: the stream reads
// nothing after its request, and must not be cut by it.
func TestStreamOutlivesReadTimeout(t *testing.T) {
	coalesce = time.Millisecond
	defer func() { coalesce = 200 * time.Millisecond }()
	s := &Server{idx: newIndex()}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(context.WithValue(r.Context(), viewerKey{}, &viewer{all: true}))
		s.watchEvents(w, r)
	}))
	srv.Config.ReadTimeout = 300 * time.Millisecond
	srv.Start()
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	time.Sleep(time.Second)
	s.idx.set(obj("HelmRelease", "ns", "late", StateReady))
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended")
			}
			if strings.Contains(l, `"name":"late"`) {
				return
			}
		case <-deadline:
			t.Fatal("no change after the read timeout")
		}
	}
}

// A Ready=True condition for an older generation is a change on its way,
// not a failure.
func TestReadyForAnOlderSpecIsProgressing(t *testing.T) {
	k := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Generation: 3},
		Status: kustomizev1.KustomizationStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue,
			Reason: "ReconciliationSucceeded", ObservedGeneration: 2}}}}
	o, ok := objectOf(k, nil)
	if !ok || o.State != StateProgressing {
		t.Fatalf("state %+v", o)
	}
	k.Status.Conditions[0].ObservedGeneration = 3
	if o, _ := objectOf(k, nil); o.State != StateReady {
		t.Fatalf("state %+v", o)
	}
	k.Status.Conditions[0] = metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "InvalidPath", ObservedGeneration: 3}
	if o, _ := objectOf(k, nil); o.State != StateFailed {
		t.Fatalf("state %+v", o)
	}
}
