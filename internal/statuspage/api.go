package statuspage

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/internal/status"
	"github.com/cozystack/cozy-aio/plan"
	"github.com/cozystack/cozy-aio/shard"
)

// Bootstrap is the node's start: the phase and what it waits on.
type Bootstrap struct {
	// Phase is network (only the units that bring the network run) or
	// all; empty when the engine runs without a bootstrap.
	Phase string `json:"phase,omitempty"`
	// Nodes are the nodes with and without a network.
	Nodes       []Node `json:"nodes,omitempty"`
	NodesError  string `json:"nodesError,omitempty"`
	WithNetwork int    `json:"withNetwork"`
	NodesTotal  int    `json:"nodesTotal"`
	// Kinds are the Flux kinds whose CRDs are established and watched, of
	// those the page shows.
	KindsWatched int `json:"kindsWatched"`
	KindsTotal   int `json:"kindsTotal"`
	// CriticalPath is the longest chain of objects not Ready, each
	// waiting on the next, the root cause last.
	CriticalPath []Link `json:"criticalPath"`
}

// Tenant is one tenant's work on the Helm shards.
type Tenant struct {
	ID        string `json:"id"`
	Shard     int    `json:"shard"`
	Weight    int    `json:"weight"`
	Queued    int    `json:"queued"`
	Waiting   int    `json:"waiting"`
	Running   int    `json:"running"`
	Succeeded uint64 `json:"succeeded"`
	Failed    uint64 `json:"failed"`
	// WaitMax is the longest an item waited for a worker, in seconds.
	WaitMax float64 `json:"waitMax"`
}

// Shard is one Helm shard.
type Shard struct {
	ID      int  `json:"id"`
	Load    int  `json:"load"`
	Tenants int  `json:"tenants"`
	Workers int  `json:"workers"`
	Owned   bool `json:"owned"`
	Queued  int  `json:"queued"`
	Waiting int  `json:"waiting"`
	Running int  `json:"running"`
}

// Overview is the page's first view: GET /api/v1/overview.
type Overview struct {
	Version   uint64      `json:"version"`
	Generated time.Time   `json:"generated"`
	Started   time.Time   `json:"started"`
	User      string      `json:"user,omitempty"`
	Bootstrap Bootstrap   `json:"bootstrap"`
	Kinds     []KindCount `json:"kinds"`
	// Failures are the failed objects, longest failing first (at most
	// 50), each with its "why" chain; FailuresTotal counts them all.
	Failures      []Failure `json:"failures"`
	FailuresTotal int       `json:"failuresTotal"`
	Replica       *Replica  `json:"replica,omitempty"`
	Shards        []Shard   `json:"shards"`
	// Tenants are the tenants with the most work first (at most 100);
	// TenantsTotal counts them all.
	Tenants      []Tenant               `json:"tenants"`
	TenantsTotal int                    `json:"tenantsTotal"`
	Clusters     []status.RemoteCluster `json:"clusters"`
	Plans        PlanCounts             `json:"plans"`
}

// PlanCounts counts the kept upgrade plans.
type PlanCounts struct {
	Kept  int `json:"kept"`
	Held  int `json:"held"`
	Risky int `json:"risky"`
}

const maxTenants = 100

// getter returns the index's objects as the viewer may see them: one it
// may not read is a placeholder "hidden" that waits on nothing.
func (s *Server) getter(visible func(Ref) bool) func(Ref) (*Object, bool) {
	return func(r Ref) (*Object, bool) {
		o, ok := s.idx.get(r)
		if !ok {
			return nil, false
		}
		if !visible(r) {
			return &Object{Ref: r, State: "hidden", Message: "not visible to you"}, true
		}
		return o, true
	}
}

func (s *Server) buildOverview(ctx context.Context, v *viewer) Overview {
	visible := v.visible(ctx)
	objs, version := s.idx.snapshot(visible)
	get := s.getter(visible)
	now := time.Now()
	ov := Overview{Version: version, Generated: now, Started: s.started, Kinds: countKinds(objs),
		Shards: []Shard{}, Tenants: []Tenant{}, Clusters: []status.RemoteCluster{}}
	if !v.all {
		ov.User = v.user.Username
	}
	ov.Failures, ov.FailuresTotal = failures(objs, get, now)
	ov.Bootstrap.CriticalPath = criticalPath(objs, get, now)
	if ov.Bootstrap.CriticalPath == nil {
		ov.Bootstrap.CriticalPath = []Link{}
	}
	m := s.metrics(now)
	ov.Bootstrap.Phase = m.Phase
	ov.Bootstrap.KindsTotal = len(status.Kinds)
	s.synced.Range(func(_, f any) bool {
		if f.(func() bool)() {
			ov.Bootstrap.KindsWatched++
		}
		return true
	})
	if f := s.opts.Source.Nodes; f != nil {
		nodes, err := f(ctx)
		if err != nil {
			ov.Bootstrap.NodesError = err.Error()
		}
		ov.Bootstrap.Nodes = nodes
		ov.Bootstrap.NodesTotal = len(nodes)
		for _, n := range nodes {
			if n.Network {
				ov.Bootstrap.WithNetwork++
			}
		}
	}
	if f := s.opts.Source.Replica; f != nil {
		r := f()
		ov.Replica = &r
	}
	s.addShards(&ov, objs, v)
	units := make([]status.Unit, 0, len(objs))
	for _, o := range objs {
		if o.Cluster != "" {
			units = append(units, status.Unit{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, Ready: o.State == StateReady, Cluster: o.Cluster})
		}
	}
	for _, c := range status.RemoteClusters(units, m.Remote, now) {
		// "Secret ns/name": shown to a viewer who sees a unit there.
		if v.all || c.Total > 0 {
			ov.Clusters = append(ov.Clusters, c)
		}
	}
	if f := s.opts.Source.Plans; f != nil {
		for p := range f {
			if !visible(Ref{p.Kind, p.Namespace, p.Name}) {
				continue
			}
			ov.Plans.Kept++
			if p.Held {
				ov.Plans.Held++
			}
			if p.Plan != nil && risky(p.Plan) {
				ov.Plans.Risky++
			}
		}
	}
	return ov
}

// metricsTTL is how long the overview reuses what it read from the
// registry: gathering it builds every family, a duration histogram per
// object among them (megabytes at thousands of releases), to read a few
// gauges.
const metricsTTL = 30 * time.Second

func (s *Server) metrics(now time.Time) status.Metrics {
	s.metricsMu.Lock()
	defer s.metricsMu.Unlock()
	if s.metricsAt.IsZero() || now.Sub(s.metricsAt) > metricsTTL {
		s.lastMetrics, s.metricsAt = status.Gathered(s.opts.Source.Metrics), now
	}
	return s.lastMetrics
}

func risky(p *plan.Plan) bool {
	for _, r := range p.Risks {
		if r.Code != plan.Hooks {
			return true
		}
	}
	return false
}

// addShards fills the shards and the tenants: a viewer who cannot see
// everything sees the shards' figures and only the tenants of the
// releases it sees.
func (s *Server) addShards(ov *Overview, objs []*Object, v *viewer) {
	if s.opts.Source.Pool == nil {
		return
	}
	st := s.opts.Source.Pool()
	for _, sh := range st.Shards {
		ov.Shards = append(ov.Shards, Shard{ID: sh.ID, Load: sh.Load, Tenants: sh.Tenants, Workers: sh.Workers, Owned: sh.Owned,
			Queued: sh.Queued, Waiting: sh.Waiting, Running: sh.Running})
	}
	mine := map[string]bool{}
	for _, o := range objs {
		if o.Tenant != "" {
			mine[o.Tenant] = true
		}
	}
	var ts []Tenant
	for _, t := range st.Tenants {
		if !v.all && !mine[t.ID] {
			continue
		}
		ts = append(ts, Tenant{ID: t.ID, Shard: t.Shard, Weight: t.Weight, Queued: t.Queued, Waiting: t.Waiting,
			Running: t.Running, Succeeded: t.Succeeded, Failed: t.Failed, WaitMax: t.WaitMax.Seconds()})
	}
	sort.SliceStable(ts, func(i, j int) bool {
		a, b := ts[i].Queued+ts[i].Waiting+ts[i].Running, ts[j].Queued+ts[j].Waiting+ts[j].Running
		if a != b {
			return a > b
		}
		return ts[i].ID < ts[j].ID
	})
	ov.TenantsTotal = len(ts)
	if len(ts) > maxTenants {
		ts = ts[:maxTenants]
	}
	if ts != nil {
		ov.Tenants = ts
	}
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Query().Get("format") {
	case "", "json":
	case "text":
		s.overviewText(w, r)
		return
	default:
		fail(w, http.StatusBadRequest, "format %q: want json or text", r.URL.Query().Get("format"))
		return
	}
	writeJSON(w, http.StatusOK, s.buildOverview(r.Context(), viewerOf(r)))
}

func (s *Server) overviewText(w http.ResponseWriter, r *http.Request) {
	ov := s.buildOverview(r.Context(), viewerOf(r))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = ov.WriteText(w)
}

// WriteText prints the overview for a terminal (curl over SSH).
func (ov Overview) WriteText(w io.Writer) error {
	var b strings.Builder
	phase := ov.Bootstrap.Phase
	if phase == "" {
		phase = "-"
	}
	fmt.Fprintf(&b, "cozy-aio  phase: %s  kinds watched: %d/%d", phase, ov.Bootstrap.KindsWatched, ov.Bootstrap.KindsTotal)
	if ov.Bootstrap.NodesTotal > 0 {
		fmt.Fprintf(&b, "  nodes with network: %d/%d", ov.Bootstrap.WithNetwork, ov.Bootstrap.NodesTotal)
	}
	if ov.Replica != nil {
		fmt.Fprintf(&b, "  leader: %t", ov.Replica.Leader)
	}
	b.WriteString("\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tREADY\tPROGRESSING\tFAILED\tSUSPENDED\tTOTAL")
	for _, k := range ov.Kinds {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\n", k.Kind, k.Ready, k.Progressing, k.Failed, k.Suspended, k.Total)
	}
	tw.Flush()
	if len(ov.Bootstrap.CriticalPath) > 0 {
		b.WriteString("\ncritical path (the root cause last):\n")
		for _, l := range ov.Bootstrap.CriticalPath {
			fmt.Fprintf(&b, "  %s  %s %s  waiting %s  %s\n", l.Ref, l.State, l.Reason, seconds(l.Waiting), oneLine(l.Message, 100))
		}
	}
	if ov.FailuresTotal > 0 {
		fmt.Fprintf(&b, "\nfailed (%d):\n", ov.FailuresTotal)
		for _, f := range ov.Failures {
			fmt.Fprintf(&b, "  %s  %s: %s\n", f.Object.Ref, f.Object.Reason, oneLine(f.Object.Message, 120))
			if len(f.Why) > 1 {
				fmt.Fprintf(&b, "    why: %s\n", WhyLine(f.Why))
			}
		}
	}
	if len(ov.Shards) > 0 {
		b.WriteString("\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SHARD\tOWNED\tLOAD\tTENANTS\tQUEUED\tWAITING\tRUNNING")
		for _, sh := range ov.Shards {
			fmt.Fprintf(tw, "%d\t%t\t%d\t%d\t%d\t%d\t%d\n", sh.ID, sh.Owned, sh.Load, sh.Tenants, sh.Queued, sh.Waiting, sh.Running)
		}
		tw.Flush()
	}
	if len(ov.Clusters) > 0 {
		b.WriteString("\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "REMOTE CLUSTER\tREADY\tREACHABLE\tREQUESTS\tERRORS")
		for _, c := range ov.Clusters {
			fmt.Fprintf(tw, "%s\t%d/%d\t%t\t%d\t%d\n", c.Name, c.Ready, c.Total, !c.Unreachable, c.Metrics.Requests, c.Metrics.Errors)
		}
		tw.Flush()
	}
	if ov.Plans.Kept > 0 {
		fmt.Fprintf(&b, "\nplans: %d kept, %d risky, %d held\n", ov.Plans.Kept, ov.Plans.Risky, ov.Plans.Held)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WhyLine prints a chain root cause first: "GitRepository/ns/a failed
// (GitOperationFailed) → Kustomization/ns/b waiting".
func WhyLine(chain []Link) string {
	parts := make([]string, 0, len(chain))
	for i := len(chain) - 1; i >= 0; i-- {
		l := chain[i]
		p := l.Ref.String() + " " + l.State
		if l.Reason != "" {
			p += " (" + l.Reason + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " → ")
}

func seconds(s float64) string { return (time.Duration(s) * time.Second).String() }

func oneLine(msg string, n int) string {
	msg = strings.Join(strings.Fields(msg), " ")
	if r := []rune(msg); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return msg
}

// List is one page of objects: GET /api/v1/objects.
type List struct {
	Version uint64    `json:"version"`
	Items   []*Object `json:"items"`
	// Total counts the objects that match; Continue, when set, is the
	// offset of the next page.
	Total    int    `json:"total"`
	Continue string `json:"continue,omitempty"`
}

type listQuery struct {
	kind, namespace, state, text string
	limit, offset                int
}

const (
	defaultLimit = 100
	maxLimit     = 500
)

func parseList(r *http.Request) (listQuery, error) {
	v := r.URL.Query()
	q := listQuery{kind: v.Get("kind"), namespace: v.Get("namespace"), state: v.Get("state"),
		text: strings.ToLower(strings.TrimSpace(v.Get("q"))), limit: defaultLimit}
	if q.kind != "" && newObject(q.kind) == nil {
		return q, fmt.Errorf("kind %q: want one of %s", q.kind, strings.Join(status.Kinds, ", "))
	}
	switch q.state {
	case "", StateReady, StateProgressing, StateFailed, StateSuspended:
	default:
		return q, fmt.Errorf("state %q: want ready, progressing, failed or suspended", q.state)
	}
	if len(q.text) > 256 {
		return q, fmt.Errorf("q: at most 256 characters")
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxLimit {
			return q, fmt.Errorf("limit %q: want 1 to %d", l, maxLimit)
		}
		q.limit = n
	}
	if c := v.Get("continue"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 {
			return q, fmt.Errorf("continue %q: want the continue of the previous page", c)
		}
		q.offset = n
	}
	return q, nil
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q, err := parseList(r)
	if err != nil {
		fail(w, http.StatusBadRequest, "%s", err.Error())
		return
	}
	v := viewerOf(r)
	visible := v.visible(r.Context())
	objs, version := s.idx.snapshot(func(ref Ref) bool {
		return (q.kind == "" || ref.Kind == q.kind) && (q.namespace == "" || ref.Namespace == q.namespace) && visible(ref)
	})
	var match []*Object
	for _, o := range objs {
		if q.matches(o) {
			match = append(match, o)
		}
	}
	out := List{Version: version, Items: []*Object{}, Total: len(match)}
	if q.offset < len(match) {
		end := min(q.offset+q.limit, len(match))
		out.Items = match[q.offset:end]
		if end < len(match) {
			out.Continue = strconv.Itoa(end)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// Detail is one object's page: GET /api/v1/objects/KIND/NAMESPACE/NAME.
type Detail struct {
	Object     *Object            `json:"object"`
	Conditions []metav1.Condition `json:"conditions"`
	// History is the object's status.history, as Flux writes it.
	History any `json:"history,omitempty"`
	// Inventory lists the objects it applied (at most 500), the first 50
	// with their health; InventoryTotal counts them all.
	Inventory      []InventoryObject `json:"inventory"`
	InventoryTotal int               `json:"inventoryTotal"`
	Plan           *status.Plan      `json:"plan,omitempty"`
	Events         []Event           `json:"events"`
	EventsError    string            `json:"eventsError,omitempty"`
	DependsOn      []Link            `json:"dependsOn"`
	Dependents     []Link            `json:"dependents"`
	Why            []Link            `json:"why"`
	Queue          *Queue            `json:"queue,omitempty"`
	Generation     int64             `json:"generation"`
	Annotations    map[string]string `json:"annotations,omitempty"`
}

// Event is one Kubernetes Event about the object.
type Event struct {
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Count   int32     `json:"count"`
	Last    time.Time `json:"last"`
}

// Queue is a HelmRelease's work on the Helm shards: running (in flight),
// queued (where, and why it has not started), waiting for a retry (until
// when) or idle.
type Queue struct {
	Tenant string `json:"tenant"`
	State  string `json:"state"`
	// Failures counts its failures in a row; Due is when a waiting
	// retry is ready to run.
	Failures     int       `json:"failures,omitempty"`
	Due          time.Time `json:"due,omitzero"`
	Shard        int       `json:"shard"`
	Position     int       `json:"position,omitempty"`
	TenantQueued int       `json:"tenantQueued,omitempty"`
	ShardQueued  int       `json:"shardQueued,omitempty"`
	Waited       float64   `json:"waited,omitempty"`
	Reason       string    `json:"reason,omitempty"`
}

const (
	maxInventory = 500
	maxEvents    = 50
)

func (s *Server) refOf(w http.ResponseWriter, r *http.Request) (Ref, bool) {
	ref := Ref{r.PathValue("kind"), r.PathValue("namespace"), r.PathValue("name")}
	if newObject(ref.Kind) == nil {
		fail(w, http.StatusBadRequest, "kind %q: want one of %s", ref.Kind, strings.Join(status.Kinds, ", "))
		return ref, false
	}
	if !viewerOf(r).can(r.Context(), "get", ref.Kind, ref.Namespace) {
		// Not found rather than forbidden: a user learns nothing of
		// namespaces it may not read.
		fail(w, http.StatusNotFound, "%s not found", ref)
		return ref, false
	}
	return ref, true
}

func (s *Server) detail(w http.ResponseWriter, r *http.Request) {
	ref, ok := s.refOf(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	obj := newObject(ref.Kind)
	if err := s.opts.Source.Cache.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj); err != nil {
		fail(w, http.StatusNotFound, "%s not found", ref)
		return
	}
	o, ok := objectOf(obj, s.opts.Source.TenantOf)
	if !ok {
		fail(w, http.StatusNotFound, "%s not found", ref)
		return
	}
	v := viewerOf(r)
	visible := v.visible(ctx)
	get := s.getter(visible)
	now := time.Now()
	d := Detail{Object: o, Conditions: []metav1.Condition{}, Inventory: []InventoryObject{}, Events: []Event{},
		DependsOn: []Link{}, Dependents: []Link{}, Why: why(ref, get, now), Generation: obj.GetGeneration()}
	if c, ok := obj.(interface{ GetConditions() []metav1.Condition }); ok {
		d.Conditions = c.GetConditions()
	}
	d.Annotations = map[string]string{}
	for k, val := range obj.GetAnnotations() {
		if strings.Contains(k, "fluxcd.io") || strings.Contains(k, "cozy-aio") {
			d.Annotations[k] = val
		}
	}
	var ids []string
	switch t := obj.(type) {
	case *helmv2.HelmRelease:
		d.History = t.Status.History
		if t.Status.Inventory != nil {
			for _, e := range t.Status.Inventory.Entries {
				ids = d.addInventory(ids, e.ID)
			}
		}
	case *kustomizev1.Kustomization:
		d.History = t.Status.History
		if t.Status.Inventory != nil {
			for _, e := range t.Status.Inventory.Entries {
				ids = d.addInventory(ids, e.ID)
			}
		}
	}
	d.Inventory = s.health(ctx, ids, o.Cluster != "")
	for _, dep := range append(append([]Ref{}, o.DependsOn...), o.Sources...) {
		if x, ok := get(dep); ok {
			d.DependsOn = append(d.DependsOn, linkOf(x, now))
		} else {
			d.DependsOn = append(d.DependsOn, Link{Ref: dep, State: "missing", Missing: true})
		}
	}
	all, _ := s.idx.snapshot(visible)
	for _, x := range all {
		for _, dep := range append(append([]Ref{}, x.DependsOn...), x.Sources...) {
			if dep == ref {
				d.Dependents = append(d.Dependents, linkOf(x, now))
				break
			}
		}
	}
	if f := s.opts.Source.Plans; f != nil {
		for p := range f {
			if p.Kind == ref.Kind && p.Namespace == ref.Namespace && p.Name == ref.Name {
				d.Plan = &p
				break
			}
		}
	}
	if o.Tenant != "" && s.opts.Source.Item != nil {
		if it, ok := s.opts.Source.Item(o.Tenant, ref.String()); ok {
			d.Queue = &Queue{Tenant: o.Tenant, State: it.State, Failures: it.Failures, Due: it.Due, Shard: -1}
			var place shard.Place
			ok := it.State == "queued" && s.opts.Source.Queued != nil
			if ok {
				place, ok = s.opts.Source.Queued(o.Tenant, ref.String())
			}
			if ok {
				d.Queue.Shard, d.Queue.Position, d.Queue.TenantQueued, d.Queue.ShardQueued = place.Shard, place.Position, place.TenantQueued, place.ShardQueued
				d.Queue.Waited, d.Queue.Reason = place.Waited.Seconds(), place.Reason(o.Tenant)
			}
		}
	}
	d.Events, d.EventsError = s.events(ctx, ref)
	writeJSON(w, http.StatusOK, d)
}

func (d *Detail) addInventory(ids []string, id string) []string {
	d.InventoryTotal++
	if len(ids) < maxInventory {
		ids = append(ids, id)
	}
	return ids
}

// events lists the newest Events about ref, from the API server (the
// engine caches none).
func (s *Server) events(ctx context.Context, ref Ref) ([]Event, string) {
	var list corev1.EventList
	sel := fields.SelectorFromSet(fields.Set{"involvedObject.kind": ref.Kind, "involvedObject.name": ref.Name})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.opts.Source.API.List(ctx, &list, client.InNamespace(ref.Namespace),
		client.MatchingFieldsSelector{Selector: sel}, client.Limit(500)); err != nil {
		return []Event{}, "reading Events: " + err.Error()
	}
	out := make([]Event, 0, len(list.Items))
	for _, e := range list.Items {
		last := e.LastTimestamp.Time
		if last.IsZero() {
			last = e.EventTime.Time
		}
		if last.IsZero() {
			last = e.CreationTimestamp.Time
		}
		out = append(out, Event{Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count, Last: last})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Last.After(out[j].Last) })
	if len(out) > maxEvents {
		out = out[:maxEvents]
	}
	return out, ""
}

// reconcile asks for a reconcile now, as `flux reconcile` does: the
// requestedAt annotation, if the viewer may patch the object.
func (s *Server) reconcile(w http.ResponseWriter, r *http.Request) {
	// A cross-site form cannot set this header: no request forgery.
	if r.Header.Get("X-Cozy-Aio-Action") == "" {
		fail(w, http.StatusForbidden, "an action needs the X-Cozy-Aio-Action header")
		return
	}
	ref, ok := s.refOf(w, r)
	if !ok {
		return
	}
	if !viewerOf(r).can(r.Context(), "patch", ref.Kind, ref.Namespace) {
		fail(w, http.StatusForbidden, "you may not patch %s", ref)
		return
	}
	obj := newObject(ref.Kind)
	obj.SetNamespace(ref.Namespace)
	obj.SetName(ref.Name)
	at := time.Now().Format(time.RFC3339Nano)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		"reconcile.fluxcd.io/requestedAt": at}}})
	if err := s.opts.Source.API.Patch(r.Context(), obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		fail(w, http.StatusBadGateway, "requesting a reconcile of %s: %s", ref, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"requestedAt": at})
}

// timeline returns the state changes of the last hour (or since ?since=,
// RFC 3339).
func (s *Server) timeline(w http.ResponseWriter, r *http.Request) {
	since := time.Time{}
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			fail(w, http.StatusBadRequest, "since %q: want an RFC 3339 time", v)
			return
		}
		since = t
	}
	entries := s.idx.Timeline(since, viewerOf(r).visible(r.Context()))
	const maxEntries = 5000
	total := len(entries)
	if total > maxEntries {
		entries = entries[total-maxEntries:]
	}
	if entries == nil {
		entries = []TimelineEntry{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": entries, "total": total})
}

// session signs a browser in with a token (POST, the token as
// `Authorization: Bearer`) and out (DELETE). The cookie holds a random ID.
func (s *Server) session(w http.ResponseWriter, r *http.Request, loopback bool) {
	switch r.Method {
	case http.MethodPost:
		if loopback {
			writeJSON(w, http.StatusOK, map[string]string{"user": ""})
			return
		}
		if r.Header.Get("Authorization") == "" {
			fail(w, http.StatusUnauthorized, "%s", errNoToken.Error())
			return
		}
		u, err := s.access.authenticate(r)
		if err != nil {
			fail(w, http.StatusUnauthorized, "%s", err.Error())
			return
		}
		id, err := s.access.newSession(u)
		if err != nil {
			fail(w, http.StatusInternalServerError, "%s", err.Error())
			return
		}
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: s.prefix + "/", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https",
			MaxAge: int(sessionTTL.Seconds())})
		writeJSON(w, http.StatusOK, map[string]string{"user": u.Username})
	case http.MethodDelete:
		if c, err := r.Cookie(sessionCookie); err == nil {
			s.access.sessions.del(c.Value)
		}
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: s.prefix + "/", MaxAge: -1})
		writeJSON(w, http.StatusOK, map[string]string{})
	default:
		fail(w, http.StatusMethodNotAllowed, "POST a token to sign in, DELETE to sign out")
	}
}
