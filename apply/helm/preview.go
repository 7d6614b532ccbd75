package helm

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/postrenderer"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cozystack/cozy-aio/apply"
	"github.com/cozystack/cozy-aio/plan"
)

// Preview plans each install and upgrade Reconcile is about to run, and
// may hold it (ReconcileOptions.Preview).
//
// The plan compares the release's new objects, rendered as the action
// renders them (values, post-renderers, lookup against the live
// cluster), with the objects of its current revision's manifest. Only the
// objects whose plan depends on the cluster are read from it: those the
// new revision adds (do they exist, and whose are they) and the
// CustomResourceDefinitions (their stored versions). Nothing is written.
type Preview struct {
	// Decide is given each plan, with the digest of the desired state
	// (the chart and values, as the revisions' digest label). An error
	// that wraps ErrHeld holds the action: nothing is written,
	// Outcome.Next is NextHeld and Reconcile returns the error. Another
	// error fails the action as its own failure would.
	Decide func(digest string, p *plan.Plan) error
	// Held, when set, is asked before the render with the digest of the
	// desired state: an error that wraps ErrHeld holds the action without
	// planning it again (its plan is held already, and not approved).
	// Default: nil, every attempt is planned.
	Held func(digest string) error
}

// ErrHeld marks the error that holds an install or upgrade (Preview).
var ErrHeld = errors.New("held")

// NextHeld: the install or upgrade is held by its plan; nothing was done.
const NextHeld NextKind = "Held"

// errRendered stops a planning render once its objects are captured.
var errRendered = errors.New("rendered for a plan")

// planStep plans one install or upgrade (Preview).
type planStep struct {
	s      *session
	pv     *Preview
	a      Action
	io     InstallOptions
	uo     UpgradeOptions
	p      prepared
	h      history
	out    *Outcome
	decide bool // ask pv.Decide
}

// newPlanStep returns the plan step of action a, or nil with no Preview.
func (s *session) newPlanStep(pv *Preview, a Action, io InstallOptions, uo UpgradeOptions, p prepared, h history, out *Outcome) *planStep {
	if pv == nil {
		return nil
	}
	return &planStep{s: s, pv: pv, a: a, io: io, uo: uo, p: p, h: h, out: out, decide: pv.Decide != nil}
}

// crdPolicy is the CRD policy of the step's action.
func (ps *planStep) crdPolicy() CRDPolicy {
	if ps.a == ActionUpgrade {
		return ps.uo.CRDs.or(CRDSkip)
	}
	return ps.io.CRDs.or(CRDCreate)
}

// inAction tells whether the action's own render can be planned: unless
// it applies CRDs of the chart's crds/ first, which the plan must cover
// before they are applied.
func (ps *planStep) inAction() bool {
	return ps.crdPolicy() == CRDSkip || len(ps.p.chart.CRDObjects()) == 0
}

// before runs before the action: a plan held already holds it again
// without a render; an action that applies CRDs first is rendered and
// planned here (a server dry-run, stopped after its render).
func (ps *planStep) before() error {
	if ps.pv.Held != nil {
		if err := ps.pv.Held(ps.p.digest); err != nil {
			return err
		}
	}
	if ps.inAction() {
		return nil
	}
	return ps.renderAndPlan()
}

// renderAndPlan renders the action as it would run, against the live
// cluster (lookup), stopped after the render, and plans it.
func (ps *planStep) renderAndPlan() error {
	capture := &renderCapture{}
	var rerr error
	if ps.a == ActionInstall {
		in := ps.s.newInstall(ps.io, ps.p, ps.h.latest() != nil)
		in.DryRunStrategy = action.DryRunServer
		capture.inner = in.PostRenderer
		in.PostRenderer = capture
		_, rerr = in.Run(ps.p.chart, ps.p.values)
	} else {
		up := ps.s.newUpgrade(ps.uo, ps.p)
		up.DryRunStrategy = action.DryRunServer
		capture.inner = up.PostRenderer
		up.PostRenderer = capture
		_, rerr = up.Run(ps.s.rel.Name, ps.p.chart, ps.p.values)
	}
	if !errors.Is(rerr, errRendered) {
		if rerr == nil {
			rerr = errors.New("the chart rendered nothing to plan")
		}
		return rerr
	}
	return ps.plan(capture.out)
}

// wrap returns the action's post-renderer, planning what it renders
// (when the plan is made in the action): the plan sees exactly what the
// action applies, and a hold stops the action before it writes anything.
func (ps *planStep) wrap(inner postrenderer.PostRenderer) postrenderer.PostRenderer {
	if ps == nil || !ps.inAction() {
		return inner
	}
	return &planningRenderer{inner: inner, ps: ps}
}

// planningRenderer is the post-renderer of an action planned as it runs.
type planningRenderer struct {
	inner postrenderer.PostRenderer
	ps    *planStep
}

func (r *planningRenderer) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	out := in
	if r.inner != nil {
		var err error
		if out, err = r.inner.Run(in); err != nil {
			return nil, err
		}
	}
	// Helm reads what comes back; the plan reads its own copy.
	if err := r.ps.plan(bytes.NewBuffer(out.Bytes())); err != nil {
		return nil, err
	}
	return out, nil
}

// renderCapture is the post-renderer of a planning render: it runs the
// release's own post-renderer, keeps what comes out and stops the action.
type renderCapture struct {
	inner postrenderer.PostRenderer
	out   *bytes.Buffer
}

func (c *renderCapture) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	out := in
	if c.inner != nil {
		var err error
		if out, err = c.inner.Run(in); err != nil {
			return nil, err
		}
	}
	c.out = out
	return nil, errRendered
}

// filenameAnnotation is the annotation Helm puts on each document it
// hands a post-renderer, and takes away after.
const filenameAnnotation = "postrenderer.helm.sh/postrender-filename"

// split reads what a render put out: the objects to apply and the hooks.
func split(rendered *bytes.Buffer) (objs, hooks []*unstructured.Unstructured, err error) {
	all, err := apply.ReadObjects(rendered, "rendered manifests")
	if err != nil {
		return nil, nil, err
	}
	for _, u := range all {
		if an := u.GetAnnotations(); an != nil {
			delete(an, filenameAnnotation)
			if len(an) == 0 {
				an = nil
			}
			u.SetAnnotations(an)
		}
		if _, hook := u.GetAnnotations()["helm.sh/hook"]; hook {
			hooks = append(hooks, u)
			continue
		}
		objs = append(objs, u)
	}
	return objs, hooks, nil
}

// plan plans what a render put out and asks the Preview whether the
// action may run: nil when it may; an error wrapping ErrHeld when it is
// held; another error when no plan could be made.
func (ps *planStep) plan(rendered *bytes.Buffer) error {
	s, a := ps.s, ps.a
	objs, hooks, err := split(rendered)
	if err != nil {
		return err
	}
	if ps.io.DisableHooks && a == ActionInstall || ps.uo.DisableHooks && a == ActionUpgrade {
		hooks = nil
	}
	var current []*unstructured.Unstructured
	if a == ActionUpgrade {
		cur := ps.h.deployed()
		if cur == nil {
			cur = ps.h.latest()
		}
		if cur != nil {
			if current, err = apply.ReadObjects(strings.NewReader(cur.Manifest), "the current revision's manifest"); err != nil {
				return err
			}
		}
	}
	for _, list := range [][]*unstructured.Unstructured{current, objs} {
		for _, u := range list {
			setOwnerMarks(u, s.rel.Name, s.rel.namespace())
		}
	}
	crds, err := chartCRDs(ps.p.chart, ps.crdPolicy())
	if err != nil {
		return err
	}
	pl, err := s.planOf(current, objs, crds, hooks, ps.crdPolicy(), a == ActionUpgrade && ps.uo.Force, ps.p.digest)
	if err != nil {
		return err
	}
	ps.out.Plan = pl
	if !ps.decide {
		return nil
	}
	return ps.pv.Decide(ps.p.digest, pl)
}

// chartCRDs are the CustomResourceDefinitions of the chart's crds/
// directories that policy applies.
func chartCRDs(ch *chartv2.Chart, policy CRDPolicy) ([]*unstructured.Unstructured, error) {
	if policy == CRDSkip {
		return nil, nil
	}
	var out []*unstructured.Unstructured
	for _, c := range ch.CRDObjects() {
		objs, err := apply.ReadObjects(bytes.NewReader(c.File.Data), "CRD file "+c.Filename)
		if err != nil {
			return nil, err
		}
		for _, u := range objs {
			if gvk := u.GroupVersionKind(); gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition" {
				out = append(out, u)
			}
		}
	}
	return out, nil
}

var crdKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// planOf plans the new objects (and the chart's CRDs policy applies)
// against the current manifest's, reading from the cluster only the
// objects the current manifest does not hold, and the CRDs.
func (s *session) planOf(current, objs, crds, hooks []*unstructured.Unstructured, crdPolicy CRDPolicy, force bool, revision string) (*plan.Plan, error) {
	scopes := newScopes(s, append(append([]*unstructured.Unstructured{}, objs...), crds...))
	for _, list := range [][]*unstructured.Unstructured{current, objs, crds, hooks} {
		for _, u := range list {
			scopes.namespace(u, s.rel.namespace())
		}
	}
	held := map[plan.Ref]*unstructured.Unstructured{}
	for _, u := range current {
		held[plan.RefOf(u)] = u
	}
	fetched := map[plan.Ref]*unstructured.Unstructured{}
	read := func(u *unstructured.Unstructured) error {
		r := plan.RefOf(u)
		if _, ok := fetched[r]; ok {
			return nil
		}
		l, err := s.liveObject(u)
		if err != nil {
			return fmt.Errorf("reading %s: %w", r, err)
		}
		fetched[r] = l
		return nil
	}
	for _, u := range objs {
		if _, ok := held[plan.RefOf(u)]; !ok || plan.RefOf(u).GroupKind() == crdKind {
			if err := read(u); err != nil {
				return nil, err
			}
		}
	}
	// The chart's CRDs are applied first, by policy; a template of the
	// same CRD is applied after them, and stays.
	var desired []*unstructured.Unstructured
	for _, u := range crds {
		if err := read(u); err != nil {
			return nil, err
		}
		if crdPolicy == CRDCreate && fetched[plan.RefOf(u)] != nil {
			continue // Create leaves an existing CRD as it is
		}
		desired = append(desired, u)
	}
	desired = append(desired, objs...)
	for _, u := range current {
		if plan.RefOf(u).GroupKind() == crdKind {
			if err := read(u); err != nil {
				return nil, err
			}
		}
	}
	immutable := "Fail"
	if force {
		immutable = "Recreate"
	}
	return plan.Compute(plan.Input{
		Current: current,
		Desired: desired,
		Hooks:   hooks,
		Live: func(r plan.Ref) *unstructured.Unstructured {
			if l, ok := fetched[r]; ok {
				return l
			}
			return held[r]
		},
		// The current manifest's objects are what the last apply set:
		// a field they set and the new ones do not is one the apply
		// removes. An object read from the cluster is compared on the
		// fields the new one sets, as server-side apply does.
		DryRun: func(r plan.Ref) bool {
			_, read := fetched[r]
			return !read && held[r] != nil
		},
		Kept: func(u *unstructured.Unstructured) bool {
			return u.GetAnnotations()["helm.sh/resource-policy"] == "keep"
		},
		ImmutablePolicy: func(*unstructured.Unstructured) string { return immutable },
		Owner:           plan.Owner{Release: s.rel.namespace() + "/" + s.rel.Name},
		Revision:        revision,
	})
}

// liveObject reads u's object from the cluster; nil when it does not
// exist, or when its kind is not served yet (a CRD the release installs).
func (s *session) liveObject(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvk := u.GroupVersionKind()
	m, err := s.c.getter.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if apimeta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ri := s.c.dyn.Resource(m.Resource)
	var l *unstructured.Unstructured
	if m.Scope.Name() == apimeta.RESTScopeNameNamespace {
		l, err = ri.Namespace(u.GetNamespace()).Get(s.ctx, u.GetName(), metav1.GetOptions{})
	} else {
		l, err = ri.Get(s.ctx, u.GetName(), metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return l, err
}

// scopes tells which kinds are namespaced: by the cluster's REST mapping,
// else by a CRD of the new state, else namespaced.
type scopes struct {
	s    *session
	crds map[schema.GroupKind]bool
}

func newScopes(s *session, objs []*unstructured.Unstructured) scopes {
	sc := scopes{s: s, crds: map[schema.GroupKind]bool{}}
	for _, u := range objs {
		if plan.RefOf(u).GroupKind() != crdKind {
			continue
		}
		group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
		scope, _, _ := unstructured.NestedString(u.Object, "spec", "scope")
		sc.crds[schema.GroupKind{Group: group, Kind: kind}] = scope != "Cluster"
	}
	return sc
}

// namespace gives a namespaced object without one the release's, and
// takes it from a cluster-scoped one, as Helm's apply does.
func (sc scopes) namespace(u *unstructured.Unstructured, def string) {
	gvk := u.GroupVersionKind()
	namespaced, ok := sc.crds[gvk.GroupKind()]
	if m, err := sc.s.c.getter.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		namespaced, ok = m.Scope.Name() == apimeta.RESTScopeNameNamespace, true
	}
	switch {
	case ok && !namespaced:
		u.SetNamespace("")
	case u.GetNamespace() == "":
		u.SetNamespace(def)
	}
}

// setOwnerMarks adds the ownership marks Helm's apply adds (see
// setHelmMetadata).
func setOwnerMarks(u *unstructured.Unstructured, name, namespace string) {
	l := u.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l["app.kubernetes.io/managed-by"] = "Helm"
	u.SetLabels(l)
	a := u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a["meta.helm.sh/release-name"] = name
	a["meta.helm.sh/release-namespace"] = namespace
	u.SetAnnotations(a)
}
