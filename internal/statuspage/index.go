package statuspage

import (
	"sort"
	"strings"
	"sync"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/internal/status"
)

// Ref names one Flux object.
type Ref struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (r Ref) String() string { return r.Kind + "/" + r.Namespace + "/" + r.Name }

// States an object is in, as the page counts them.
const (
	StateReady       = "ready"
	StateProgressing = "progressing"
	StateFailed      = "failed"
	StateSuspended   = "suspended"
)

// Object is what the page keeps of one Flux object: small, so that 3,000
// of them cost little, and enough for lists, counts and the "why" line.
type Object struct {
	Ref
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Since is when Ready last changed.
	Since time.Time `json:"since,omitzero"`
	// Revision is the last applied (or attempted) revision.
	Revision  string `json:"revision,omitempty"`
	DependsOn []Ref  `json:"dependsOn,omitempty"`
	// Sources are the objects whose artifacts this one reads.
	Sources []Ref `json:"sources,omitempty"`
	// Cluster names the remote cluster (spec.kubeConfig), as
	// status.Unit.Cluster does.
	Cluster string `json:"cluster,omitempty"`
	// Tenant is a HelmRelease's tenant on the Helm shards.
	Tenant string `json:"tenant,omitempty"`
	// Handled is the last reconcile request (reconcile.fluxcd.io/
	// requestedAt) the engine handled: "reconcile now" is done when it
	// shows the value it wrote.
	Handled string `json:"handled,omitempty"`
}

// maxMessage bounds the message kept per object; the object's page reads
// the whole condition from the cache.
const maxMessage = 1024

// objectOf makes the page's Object of a Flux object; false for a type the
// page does not show.
func objectOf(obj client.Object, tenantOf func(client.Object) string) (*Object, bool) {
	kind := kindOf(obj)
	if kind == "" {
		return nil, false
	}
	u, ok := status.UnitOf(kind, obj)
	if !ok {
		return nil, false
	}
	o := &Object{Ref: Ref{kind, obj.GetNamespace(), obj.GetName()}, Reason: u.Reason, Since: u.ReadySince, Cluster: u.Cluster}
	o.Message = u.Message
	if len(o.Message) > maxMessage {
		o.Message = o.Message[:maxMessage] + "…"
	}
	switch {
	case suspended(obj):
		o.State = StateSuspended
	case u.Ready:
		o.State = StateReady
	case u.Settled && !readyForOlderSpec(obj):
		o.State = StateFailed
	default:
		// Not done yet: on its way, or Ready for a spec older than the
		// one it has now (a change the engine has not reconciled yet).
		o.State = StateProgressing
	}
	ns := obj.GetNamespace()
	dep := func(kind, namespace, name string) Ref {
		if namespace == "" {
			namespace = ns
		}
		return Ref{kind, namespace, name}
	}
	switch t := obj.(type) {
	case *helmv2.HelmRelease:
		o.Handled = t.Status.LastHandledReconcileAt
		for _, d := range t.Spec.DependsOn {
			o.DependsOn = append(o.DependsOn, dep(helmv2.HelmReleaseKind, d.Namespace, d.Name))
		}
		if c := t.Spec.ChartRef; c != nil {
			o.Sources = append(o.Sources, dep(c.Kind, c.Namespace, c.Name))
		} else if t.Spec.Chart != nil {
			// The HelmChart the release's template makes.
			o.Sources = append(o.Sources, dep(sourcev1.HelmChartKind, t.Spec.Chart.Spec.SourceRef.Namespace, t.Namespace+"-"+t.Name))
		}
		o.Revision = t.Status.LastAttemptedRevision
		if tenantOf != nil {
			o.Tenant = tenantOf(obj)
		}
	case *kustomizev1.Kustomization:
		o.Handled = t.Status.LastHandledReconcileAt
		for _, d := range t.Spec.DependsOn {
			o.DependsOn = append(o.DependsOn, dep(kustomizev1.KustomizationKind, d.Namespace, d.Name))
		}
		o.Sources = append(o.Sources, dep(t.Spec.SourceRef.Kind, t.Spec.SourceRef.Namespace, t.Spec.SourceRef.Name))
		o.Revision = t.Status.LastAppliedRevision
	case *swv1beta1.ArtifactGenerator:
		o.Handled = t.Status.LastHandledReconcileAt
		for _, s := range t.Spec.Sources {
			o.Sources = append(o.Sources, dep(s.Kind, s.Namespace, s.Name))
		}
	case *sourcev1.ExternalArtifact:
		if s := t.Spec.SourceRef; s != nil {
			o.Sources = append(o.Sources, dep(s.Kind, s.Namespace, s.Name))
		}
		if t.Status.Artifact != nil {
			o.Revision = t.Status.Artifact.Revision
		}
	case *sourcev1.GitRepository:
		o.Handled = t.Status.LastHandledReconcileAt
		if t.Status.Artifact != nil {
			o.Revision = t.Status.Artifact.Revision
		}
	case *sourcev1.OCIRepository:
		o.Handled = t.Status.LastHandledReconcileAt
		if t.Status.Artifact != nil {
			o.Revision = t.Status.Artifact.Revision
		}
	}
	return o, true
}

// readyForOlderSpec tells an object whose Ready is True for a generation
// older than its own: its spec changed and the engine has not answered.
func readyForOlderSpec(obj client.Object) bool {
	c, ok := obj.(interface{ GetConditions() []metav1.Condition })
	if !ok {
		return false
	}
	for _, cond := range c.GetConditions() {
		if cond.Type == "Ready" {
			return cond.Status == metav1.ConditionTrue && cond.ObservedGeneration < obj.GetGeneration()
		}
	}
	return false
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *sourcev1.GitRepository:
		return sourcev1.GitRepositoryKind
	case *sourcev1.OCIRepository:
		return sourcev1.OCIRepositoryKind
	case *swv1beta1.ArtifactGenerator:
		return swv1beta1.ArtifactGeneratorKind
	case *sourcev1.ExternalArtifact:
		return sourcev1.ExternalArtifactKind
	case *kustomizev1.Kustomization:
		return kustomizev1.KustomizationKind
	case *helmv2.HelmRelease:
		return helmv2.HelmReleaseKind
	}
	return ""
}

func suspended(obj client.Object) bool {
	switch t := obj.(type) {
	case *sourcev1.GitRepository:
		return t.Spec.Suspend
	case *sourcev1.OCIRepository:
		return t.Spec.Suspend
	case *kustomizev1.Kustomization:
		return t.Spec.Suspend
	case *helmv2.HelmRelease:
		return t.Spec.Suspend
	}
	return false
}

// newObject returns an empty object of a kind the page shows.
func newObject(kind string) client.Object {
	switch kind {
	case sourcev1.GitRepositoryKind:
		return &sourcev1.GitRepository{}
	case sourcev1.OCIRepositoryKind:
		return &sourcev1.OCIRepository{}
	case swv1beta1.ArtifactGeneratorKind:
		return &swv1beta1.ArtifactGenerator{}
	case sourcev1.ExternalArtifactKind:
		return &sourcev1.ExternalArtifact{}
	case kustomizev1.KustomizationKind:
		return &kustomizev1.Kustomization{}
	case helmv2.HelmReleaseKind:
		return &helmv2.HelmRelease{}
	}
	return nil
}

// TimelineEntry is one change of an object's state.
type TimelineEntry struct {
	At time.Time `json:"at"`
	Ref
	// From and To are the states before and after; From is empty for a
	// new object, To "deleted" for one that went away.
	From   string `json:"from,omitempty"`
	To     string `json:"to"`
	Reason string `json:"reason,omitempty"`
}

// Bounds of what the index keeps beside the objects.
const (
	// timelineCap bounds the timeline: at most this many changes, and
	// none older than timelineSpan.
	timelineCap  = 20000
	timelineSpan = time.Hour
	// maxDirty bounds what one subscriber owes its client: past it, the
	// client is told to reload instead.
	maxDirty = 4096
)

// index is the page's view of every Flux object, fed by the informers.
type index struct {
	mu       sync.RWMutex
	objs     map[Ref]*Object
	version  uint64
	timeline []TimelineEntry // ring, oldest at head
	head     int
	subs     map[*subscriber]struct{}
	now      func() time.Time
	// updates counts the change batches sent to clients.
	updates uint64
}

func newIndex() *index {
	return &index{objs: map[Ref]*Object{}, subs: map[*subscriber]struct{}{}, now: time.Now}
}

// set records o, and a timeline entry when its state or reason changed.
func (x *index) set(o *Object) {
	x.mu.Lock()
	defer x.mu.Unlock()
	old := x.objs[o.Ref]
	if old != nil && sameObject(old, o) {
		return
	}
	x.objs[o.Ref] = o
	x.version++
	if old == nil || old.State != o.State || old.Reason != o.Reason {
		e := TimelineEntry{At: x.now(), Ref: o.Ref, To: o.State, Reason: o.Reason}
		if old != nil {
			e.From = old.State
		}
		x.record(e)
	}
	x.notify(o.Ref)
}

func (x *index) remove(r Ref) {
	x.mu.Lock()
	defer x.mu.Unlock()
	old, ok := x.objs[r]
	if !ok {
		return
	}
	delete(x.objs, r)
	x.version++
	x.record(TimelineEntry{At: x.now(), Ref: r, From: old.State, To: "deleted"})
	x.notify(r)
}

func sameObject(a, b *Object) bool {
	return a.State == b.State && a.Reason == b.Reason && a.Message == b.Message && a.Since.Equal(b.Since) &&
		a.Revision == b.Revision && a.Cluster == b.Cluster && a.Tenant == b.Tenant && a.Handled == b.Handled &&
		equalRefs(a.DependsOn, b.DependsOn) && equalRefs(a.Sources, b.Sources)
}

func equalRefs(a, b []Ref) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (x *index) record(e TimelineEntry) {
	if len(x.timeline) < timelineCap {
		x.timeline = append(x.timeline, e)
		return
	}
	x.timeline[x.head] = e
	x.head = (x.head + 1) % timelineCap
}

// Timeline returns the changes since the given time (at most the last
// hour), oldest first, of the objects keep lets through.
func (x *index) Timeline(since time.Time, keep func(Ref) bool) []TimelineEntry {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if floor := x.now().Add(-timelineSpan); since.Before(floor) {
		since = floor
	}
	var out []TimelineEntry
	n := len(x.timeline)
	for i := range n {
		e := x.timeline[(x.head+i)%n]
		if e.At.Before(since) || !keep(e.Ref) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// snapshot returns the objects keep lets through, sorted by kind,
// namespace and name, and the index's version.
func (x *index) snapshot(keep func(Ref) bool) ([]*Object, uint64) {
	x.mu.RLock()
	out := make([]*Object, 0, len(x.objs))
	for r, o := range x.objs {
		if keep(r) {
			out = append(out, o)
		}
	}
	version := x.version
	x.mu.RUnlock()
	// Sorted outside the lock: the informers' handlers never wait on a
	// reader (a handler that waits makes its informer queue events, and
	// hold the objects they carry).
	sortObjects(out)
	return out, version
}

// counts counts the objects keep lets through per kind and state, and
// returns the index's version: no copy, no sort, for each live batch.
func (x *index) counts(keep func(Ref) bool) ([]KindCount, uint64) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]KindCount, len(status.Kinds))
	for i, k := range status.Kinds {
		out[i].Kind = k
	}
	for r, o := range x.objs {
		if i := kindOrder(r.Kind); i < len(out) && keep(r) {
			out[i].add(o.State)
		}
	}
	return out, x.version
}

func (x *index) get(r Ref) (*Object, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	o, ok := x.objs[r]
	return o, ok
}

func sortObjects(objs []*Object) {
	sort.Slice(objs, func(i, j int) bool { return lessRef(objs[i].Ref, objs[j].Ref) })
}

func lessRef(a, b Ref) bool {
	if a.Kind != b.Kind {
		return kindOrder(a.Kind) < kindOrder(b.Kind)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

func kindOrder(kind string) int {
	for i, k := range status.Kinds {
		if k == kind {
			return i
		}
	}
	return len(status.Kinds)
}

// subscriber is one live client: the objects changed since it was last
// sent, bounded by maxDirty.
type subscriber struct {
	mu       sync.Mutex
	dirty    map[Ref]struct{}
	overflow bool
	wake     chan struct{}
}

func (x *index) subscribe() *subscriber {
	s := &subscriber{dirty: map[Ref]struct{}{}, wake: make(chan struct{}, 1)}
	x.mu.Lock()
	x.subs[s] = struct{}{}
	x.mu.Unlock()
	return s
}

func (x *index) unsubscribe(s *subscriber) {
	x.mu.Lock()
	delete(x.subs, s)
	x.mu.Unlock()
}

// notify marks r dirty for every subscriber; x.mu is held.
func (x *index) notify(r Ref) {
	for s := range x.subs {
		s.mu.Lock()
		if !s.overflow {
			if len(s.dirty) >= maxDirty {
				s.overflow = true
				clear(s.dirty)
			} else {
				s.dirty[r] = struct{}{}
			}
		}
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// take returns what s owes its client and clears it: the changed refs,
// or overflow when there were too many to send one by one.
func (s *subscriber) take() (refs []Ref, overflow bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.overflow {
		s.overflow = false
		return nil, true
	}
	for r := range s.dirty {
		refs = append(refs, r)
	}
	clear(s.dirty)
	return refs, false
}

// pending is how many refs s holds (tests).
func (s *subscriber) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.dirty)
}

// matches tells whether o passes a list query's filters.
func (q listQuery) matches(o *Object) bool {
	if q.kind != "" && o.Kind != q.kind {
		return false
	}
	if q.namespace != "" && o.Namespace != q.namespace {
		return false
	}
	if q.state != "" && o.State != q.state {
		return false
	}
	if q.text != "" && !strings.Contains(strings.ToLower(o.Namespace+"/"+o.Name+" "+o.Message), q.text) {
		return false
	}
	return true
}
