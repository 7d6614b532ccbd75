package helm

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// Cache answers two questions Helm asks before it writes from
// metadata-only watches, instead of one request each:
//
//   - has release N any record in namespace S? Helm reads a release's
//     history before it installs it; the answer comes from a watch of the
//     Secrets labelled owner=helm;
//   - does object ns/name of resource R exist? Helm's ownership check
//     reads every object it is about to create; the answer comes from a
//     watch of R, started the first time Helm asks about R.
//
// Only "no" is answered from memory: for "yes" Helm still reads the
// records or the object, whose content it needs. What the Manager writes
// itself is known at once. A watch trails the writes of other clients by
// milliseconds, so an object another client created in that window is
// answered "absent": the same race as Helm's own check-then-apply, a few
// milliseconds wider. The Cache serves the Manager's own identity only;
// releases applied as a service account ask the API server, since the
// answer must be the one that account may see.
//
// The zero Cache is not usable; make one with NewCache and run it with
// Start (it is a controller-runtime Runnable). Until Start, and until a
// watch has listed its resource once, every question goes to the API
// server.
type Cache struct {
	md  metadata.Interface
	max int

	mu      sync.Mutex
	ctx     context.Context
	objects map[schema.GroupVersionResource]*keySet
	records *recordSet

	answered atomic.Int64
}

// NewCache returns a Cache that watches through cfg.
func NewCache(cfg *rest.Config) (*Cache, error) {
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	hideAnswersFromRequestMetrics()
	return &Cache{md: md, max: 64, objects: map[schema.GroupVersionResource]*keySet{}}, nil
}

// Start runs the Cache's watches until ctx ends.
func (c *Cache) Start(ctx context.Context) error {
	records := newRecordSet()
	c.mu.Lock()
	c.ctx, c.records = ctx, records
	c.mu.Unlock()
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	go c.reflect(ctx, secrets, "owner=helm", records)
	<-ctx.Done()
	return nil
}

// NeedLeaderElection is false: every replica answers its own questions.
func (c *Cache) NeedLeaderElection() bool { return false }

// Answered is how many questions the Cache has answered without a request.
func (c *Cache) Answered() int64 { return c.answered.Load() }

func (c *Cache) reflect(ctx context.Context, gvr schema.GroupVersionResource, selector string, store cache.ReflectorStore) {
	ri := c.md.Resource(gvr)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return ri.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return ri.Watch(ctx, o)
		},
	}
	r := cache.NewReflectorWithOptions(lw, &metav1.PartialObjectMetadata{}, store,
		cache.ReflectorOptions{Name: "helm-cache " + gvr.String()})
	r.RunWithContext(ctx)
}

// noRecords tells whether release name in namespace has no record, as far
// as the Cache knows for sure.
func (c *Cache) noRecords(namespace, name string) bool {
	if r := c.recordSet(); r == nil || !r.none(namespace+"/"+name) {
		return false
	}
	c.answered.Add(1)
	return true
}

// latestRecord returns what the labels of the release's newest record
// say, when the Cache knows it for sure.
func (c *Cache) latestRecord(namespace, name string) (recordMeta, bool) {
	r := c.recordSet()
	if r == nil {
		return recordMeta{}, false
	}
	return r.latest(namespace + "/" + name)
}

// wroteRecord notes that this process wrote revision version of the
// release.
func (c *Cache) wroteRecord(namespace, name string, version int) {
	if r := c.recordSet(); r != nil {
		r.wrote(namespace+"/"+name, version)
	}
}

// recordSet is the records' store, nil before Start.
func (c *Cache) recordSet() *recordSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.records
}

// absent tells whether the object is known not to exist. The first
// question about a resource starts its watch and is not answered.
func (c *Cache) absent(gvr schema.GroupVersionResource, namespace, name string) bool {
	c.mu.Lock()
	s, ok := c.objects[gvr]
	if !ok && c.ctx != nil && len(c.objects) < c.max {
		s = newKeySet()
		c.objects[gvr] = s
		go c.reflect(c.ctx, gvr, "", s)
	}
	c.mu.Unlock()
	if s == nil || !s.absent(namespace, name) {
		return false
	}
	c.answered.Add(1)
	return true
}

func (c *Cache) wroteObject(gvr schema.GroupVersionResource, namespace, name string) {
	c.mu.Lock()
	s := c.objects[gvr]
	c.mu.Unlock()
	if s != nil {
		s.wrote(namespace, name)
	}
}

// transport answers Helm's reads of single objects that the Cache knows
// not to exist with the API server's 404, and notes the objects written
// through it.
func (c *Cache) transport(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		gvr, ns, name, ok := objectPath(req.URL.Path)
		if !ok {
			return next.RoundTrip(req)
		}
		if req.Method == http.MethodGet && name != "" && c.absent(gvr, ns, name) {
			return notFound(req, gvr, name), nil
		}
		resp, err := next.RoundTrip(req)
		if err == nil && resp.StatusCode < 300 {
			switch req.Method {
			case http.MethodPost, http.MethodPut, http.MethodPatch:
				c.wroteObject(gvr, ns, name)
			}
		}
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// objectPath parses an API path of an object (name set) or of a
// collection (name empty): /api/v1[/namespaces/NS]/RES[/NAME] or
// /apis/G/V[/namespaces/NS]/RES[/NAME]. Subresources and other paths are
// not objects.
func objectPath(p string) (gvr schema.GroupVersionResource, ns, name string, ok bool) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		gvr.Version, parts = parts[1], parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		gvr.Group, gvr.Version, parts = parts[1], parts[2], parts[3:]
	default:
		return gvr, "", "", false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		ns, parts = parts[1], parts[2:]
	}
	switch len(parts) {
	case 1:
		gvr.Resource = parts[0]
	case 2:
		gvr.Resource, name = parts[0], parts[1]
	default:
		return gvr, "", "", false
	}
	return gvr, ns, name, gvr.Resource != ""
}

// notFound is the API server's answer to a read of a missing object.
func notFound(req *http.Request, gvr schema.GroupVersionResource, name string) *http.Response {
	st := apierrors.NewNotFound(gvr.GroupResource(), name).ErrStatus
	st.APIVersion, st.Kind = "v1", "Status"
	body, _ := json.Marshal(st)
	answeredFromCache.Add(1)
	return &http.Response{
		Status: "404 Not Found", StatusCode: http.StatusNotFound,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": []string{"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// answeredFromCache counts the 404s the Caches made up and client-go has
// not counted yet: client-go counts every response in
// rest_client_requests_total, including ours, which never reached the API
// server. The wrapper below takes them out again, so that the metric
// stays the count of requests the API server answered.
var (
	answeredFromCache atomic.Int64
	hideOnce          sync.Once
)

func hideAnswersFromRequestMetrics() {
	hideOnce.Do(func() {
		clientmetrics.RequestResult = hiddenAnswers{clientmetrics.RequestResult}
	})
}

type hiddenAnswers struct{ next clientmetrics.ResultMetric }

func (h hiddenAnswers) Increment(ctx context.Context, code, method, host string) {
	if code == "404" && method == http.MethodGet {
		for {
			n := answeredFromCache.Load()
			if n <= 0 {
				break
			}
			if answeredFromCache.CompareAndSwap(n, n-1) {
				return
			}
		}
	}
	if h.next != nil {
		h.next.Increment(ctx, code, method, host)
	}
}

// keySet is the set of objects of one resource, by namespace/name; a
// ReflectorStore that keeps nothing else of them.
type keySet struct {
	syncWait
	mu     sync.RWMutex
	synced bool
	keys   map[string]struct{}
	// recent are the objects this process wrote in the last
	// recentWindow, by key, and the namespaces where it created one by
	// POST (key "namespace/", the name unread): a list that began before
	// such a write may not have it, and absence in such a namespace is
	// not answered until the watch has had time to see the new object.
	recent map[string]time.Time
}

// recentWindow is how long this process's own writes are trusted over
// what the watch has listed.
const recentWindow = 2 * time.Second

func newKeySet() *keySet {
	return &keySet{syncWait: newSyncWait(), keys: map[string]struct{}{}, recent: map[string]time.Time{}}
}

func (s *keySet) absent(namespace, name string) bool {
	s.waitSynced()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.synced {
		return false
	}
	if t, ok := s.recent[namespace+"/"]; ok && time.Since(t) < recentWindow {
		return false
	}
	_, ok := s.keys[namespace+"/"+name]
	return !ok
}

func (s *keySet) wrote(namespace, name string) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.recent) > 4096 {
		for k, t := range s.recent {
			if now.Sub(t) >= recentWindow {
				delete(s.recent, k)
			}
		}
	}
	k := namespace + "/" + name
	s.recent[k] = now
	if name != "" {
		s.keys[k] = struct{}{}
	}
}

func objectKey(obj any) (string, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Key, true
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return "", false
	}
	return m.GetNamespace() + "/" + m.GetName(), true
}

func (s *keySet) Add(obj any) error {
	if k, ok := objectKey(obj); ok {
		s.mu.Lock()
		s.keys[k] = struct{}{}
		s.mu.Unlock()
	}
	return nil
}

func (s *keySet) Update(obj any) error { return s.Add(obj) }

func (s *keySet) Delete(obj any) error {
	if k, ok := objectKey(obj); ok {
		s.mu.Lock()
		delete(s.keys, k)
		s.mu.Unlock()
	}
	return nil
}

func (s *keySet) Replace(list []any, _ string) error {
	keys := make(map[string]struct{}, len(list))
	for _, obj := range list {
		if k, ok := objectKey(obj); ok {
			keys[k] = struct{}{}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, t := range s.recent {
		switch {
		case time.Since(t) >= recentWindow:
			delete(s.recent, k)
		case !strings.HasSuffix(k, "/"):
			keys[k] = struct{}{}
		}
	}
	s.keys, s.synced = keys, true
	s.done()
	return nil
}

func (s *keySet) Resync() error { return nil }

// recordSet knows the release Secrets of each release (namespace/release
// name, from their "name" label) and what their labels say.
type recordSet struct {
	syncWait
	mu      sync.RWMutex
	synced  bool
	secrets map[string]recordMeta // Secret namespace/name → its labels
	// byRel are the Secrets of each release: a slice, not a map, as a
	// release keeps a handful of revisions and a map per release cost
	// about 0.6 KB of memory per release.
	byRel map[string][]string
	// written are the releases this process wrote a record of, with the
	// newest revision written, kept until the watch has seen it.
	written map[string]int
}

// recordMeta is what a release Secret's labels say of its revision.
type recordMeta struct {
	release string // namespace/release name
	version int
	status  string
	digest  string
}

func newRecordSet() *recordSet {
	return &recordSet{syncWait: newSyncWait(), secrets: map[string]recordMeta{}, byRel: map[string][]string{}, written: map[string]int{}}
}

// latest returns what the labels of the newest revision of release say,
// when the watch has listed the records and has seen every record this
// process wrote of it.
func (s *recordSet) latest(release string) (recordMeta, bool) {
	s.waitSynced()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.synced {
		return recordMeta{}, false
	}
	var out recordMeta
	for _, sec := range s.byRel[release] {
		if m := s.secrets[sec]; m.version > out.version {
			out = m
		}
	}
	if v, unseen := s.written[release]; unseen && v > out.version {
		return recordMeta{}, false
	}
	return out, out.version > 0
}

func (s *recordSet) none(release string) bool {
	s.waitSynced()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.synced || len(s.byRel[release]) > 0 {
		return false
	}
	_, ok := s.written[release]
	return !ok
}

func (s *recordSet) wrote(release string, version int) {
	s.mu.Lock()
	for _, sec := range s.byRel[release] {
		if s.secrets[sec].version >= version {
			// The watch has seen it already (it can be quicker than
			// the writer's note).
			s.mu.Unlock()
			return
		}
	}
	if version > s.written[release] {
		s.written[release] = version
	}
	s.mu.Unlock()
}

// releaseOf returns a release Secret's key and what its labels say; a
// deleted object's meta has no release.
func releaseOf(obj any) (secret string, meta recordMeta, ok bool) {
	if d, isD := obj.(cache.DeletedFinalStateUnknown); isD {
		return d.Key, recordMeta{}, true
	}
	m, isM := obj.(metav1.Object)
	if !isM {
		return "", recordMeta{}, false
	}
	ns, l := m.GetNamespace(), m.GetLabels()
	meta = recordMeta{status: l["status"], digest: l[LabelDigest]}
	if l["name"] != "" {
		meta.release = ns + "/" + l["name"]
	}
	meta.version, _ = strconv.Atoi(l["version"])
	return ns + "/" + m.GetName(), meta, true
}

// put adds or updates a Secret; s.mu is held.
func (s *recordSet) put(secret string, meta recordMeta) {
	old, ok := s.secrets[secret]
	if ok && old.release != meta.release {
		s.drop(secret)
		ok = false
	}
	s.secrets[secret] = meta
	if !ok {
		s.byRel[meta.release] = append(s.byRel[meta.release], secret)
	}
	if meta.version >= s.written[meta.release] {
		delete(s.written, meta.release)
	}
}

// drop removes a Secret; s.mu is held.
func (s *recordSet) drop(secret string) {
	old, ok := s.secrets[secret]
	if !ok {
		return
	}
	delete(s.secrets, secret)
	rest := slices.DeleteFunc(s.byRel[old.release], func(k string) bool { return k == secret })
	if len(rest) == 0 {
		delete(s.byRel, old.release)
	} else {
		s.byRel[old.release] = rest
	}
}

func (s *recordSet) Add(obj any) error {
	if sec, meta, ok := releaseOf(obj); ok && meta.release != "" {
		s.mu.Lock()
		s.put(sec, meta)
		s.mu.Unlock()
	}
	return nil
}

func (s *recordSet) Update(obj any) error { return s.Add(obj) }

func (s *recordSet) Delete(obj any) error {
	if sec, _, ok := releaseOf(obj); ok {
		s.mu.Lock()
		s.drop(sec)
		s.mu.Unlock()
	}
	return nil
}

func (s *recordSet) Replace(list []any, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secrets, s.byRel = map[string]recordMeta{}, map[string][]string{}
	for _, obj := range list {
		if sec, meta, ok := releaseOf(obj); ok && meta.release != "" {
			s.put(sec, meta)
		}
	}
	s.synced = true
	s.done()
	return nil
}

func (s *recordSet) Resync() error { return nil }

// syncWait lets the first questions after a watch starts wait briefly
// for its first list (a fraction of a second), rather than each cost a
// request while it runs: an engine starting with a thousand releases
// asks them all at once.
type syncWait struct {
	started time.Time
	synced  chan struct{}
	once    *sync.Once
}

// syncPatience is how long after its watch started a question waits for
// the first list.
const syncPatience = 2 * time.Second

func newSyncWait() syncWait {
	return syncWait{started: time.Now(), synced: make(chan struct{}), once: &sync.Once{}}
}

func (w syncWait) done() { w.once.Do(func() { close(w.synced) }) }

func (w syncWait) waitSynced() {
	left := syncPatience - time.Since(w.started)
	if left <= 0 {
		return
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-w.synced:
	case <-t.C:
	}
}
