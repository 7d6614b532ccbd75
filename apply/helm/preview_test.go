package helm_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/plan"
	"github.com/cozystack/cozy-aio/source/oci"
)

func seaweedV2() map[string]string {
	files := chartFiles("seaweedfs", nil)
	files["Chart.yaml"] = strings.Replace(files["Chart.yaml"], "version: 4.0.405", "version: 4.31.0", 1)
	return files
}

func seaweedChart(version string) helm.Chart {
	return helm.Chart{Ref: "oci://" + reg.Host() + "/charts/seaweedfs", Version: version, Registry: oci.Registry{PlainHTTP: true}}
}

// recorder is a Preview that keeps the plans it is given and holds the
// risky ones while hold is set.
type recorder struct {
	plans []*plan.Plan
	hold  bool
}

func (r *recorder) preview() *helm.Preview {
	return &helm.Preview{Decide: func(_ string, p *plan.Plan) error {
		r.plans = append(r.plans, p)
		if r.hold && p.Risky() {
			return fmt.Errorf("%w: %d risks, plan %s", helm.ErrHeld, len(p.Risks), p.Hash)
		}
		return nil
	}}
}

func (r *recorder) last(t *testing.T) *plan.Plan {
	t.Helper()
	if len(r.plans) == 0 {
		t.Fatal("no plan made")
	}
	return r.plans[len(r.plans)-1]
}

func statefulSetExists(t *testing.T, ns, name string) bool {
	t.Helper()
	err := cp.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &appsv1.StatefulSet{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func risksOf(p *plan.Plan, code plan.Code) []plan.Risk {
	var out []plan.Risk
	for _, r := range p.Risks {
		if r.Code == code {
			out = append(out, r)
		}
	}
	return out
}

// The SeaweedFS incident rebuilt: 4.31.0 renames the filer StatefulSet
// after the release. The plan names the duplicate workload, its new empty
// claims and the Service that selects both; held, nothing changes; let go,
// the upgrade runs.
func TestPreviewHoldsTheSeaweedFSRename(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	rel := helm.Release{Name: "rel", Namespace: ns}
	rec := &recorder{hold: true}
	o := helm.ReconcileOptions{Spec: helm.Spec{Chart: seaweedChart("4.0.405"), Wait: helm.WaitNone}, Preview: rec.preview()}

	out, err := m.Reconcile(ctx, rel, o, helm.State{})
	if err != nil {
		t.Fatal(err)
	}
	first := rec.last(t)
	if first.Risky() || out.Plan != first {
		t.Fatalf("install plan: risky %v, outcome's plan %p, given %p: %+v", first.Risky(), out.Plan, first, first.Risks)
	}
	for _, obj := range first.Objects {
		if obj.Action != plan.Create {
			t.Fatalf("install plan: %s %s, want create", obj.Ref, obj.Action)
		}
	}

	o.Spec.Chart = seaweedChart("4.31.0")
	out, err = m.Reconcile(ctx, rel, o, out.State)
	if !errors.Is(err, helm.ErrHeld) || out.Next.Kind != helm.NextHeld {
		t.Fatalf("upgrade: err %v, next %+v; want held", err, out.Next)
	}
	p := rec.last(t)
	dup := risksOf(p, plan.DuplicateWorkload)
	if len(dup) != 2 {
		t.Fatalf("DuplicateWorkload risks %+v, want the StatefulSet and the Service", p.Risks)
	}
	sts := plan.Ref{Group: "apps", Kind: "StatefulSet", Namespace: ns, Name: "rel-seaweedfs-filer"}
	// Sorted by object: the Service (core group) first.
	if dup[1].Object != sts || !strings.Contains(dup[1].Message, "data-rel-seaweedfs-filer-0") {
		t.Fatalf("risk %+v: want %s with its new claim", dup[1], sts)
	}
	if dup[0].Object.Kind != "Service" || dup[0].Object.Name != "seaweedfs-s3" {
		t.Fatalf("risk %+v: want Service seaweedfs-s3", dup[0])
	}
	if !statefulSetExists(t, ns, "seaweedfs-filer") || statefulSetExists(t, ns, "rel-seaweedfs-filer") {
		t.Fatal("the held upgrade changed the StatefulSets")
	}
	if r, err := m.Get(ctx, rel); err != nil || r.Revision != 1 {
		t.Fatalf("release after the hold: %+v, %v; want revision 1", r, err)
	}

	rec.hold = false
	out, err = m.Reconcile(ctx, rel, o, out.State)
	if err != nil || out.Release.Revision != 2 {
		t.Fatalf("upgrade let go: revision %d, %v", out.Release.Revision, err)
	}
	if rec.last(t).Hash != p.Hash {
		t.Fatal("the same upgrade against the same cluster planned with another hash")
	}
	if !statefulSetExists(t, ns, "rel-seaweedfs-filer") || statefulSetExists(t, ns, "seaweedfs-filer") {
		t.Fatal("the upgrade did not replace the StatefulSet")
	}
}

// A chart that looks up its own Secret keeps its value: planned against
// the live cluster, the Secret is unchanged, and its value shows nowhere.
func TestPreviewPlansLookupAgainstLiveState(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	rel := helm.Release{Name: "look", Namespace: ns}
	rec := &recorder{}
	chart := helm.Chart{Ref: "oci://" + reg.Host() + "/charts/lookup", Version: "0.1.0", Registry: oci.Registry{PlainHTTP: true}}
	o := helm.ReconcileOptions{Spec: helm.Spec{Chart: chart}, Preview: rec.preview()}
	out, err := m.Reconcile(ctx, rel, o, helm.State{})
	if err != nil {
		t.Fatal(err)
	}
	var sec corev1.Secret
	if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "look-password"}, &sec); err != nil {
		t.Fatal(err)
	}
	o.Spec.Values = []map[string]any{values("message", "two")}
	if _, err := m.Reconcile(ctx, rel, o, out.State); err != nil {
		t.Fatal(err)
	}
	p := rec.last(t)
	for _, obj := range p.Objects {
		want := plan.Unchanged
		if obj.Ref.Kind == "ConfigMap" {
			want = plan.Update
		}
		if obj.Action != want {
			t.Fatalf("%s: %s, want %s (%+v)", obj.Ref, obj.Action, want, obj.Changes)
		}
	}
	var text strings.Builder
	if err := p.WriteText(&text, true); err != nil {
		t.Fatal(err)
	}
	if pw := string(sec.Data["password"]); strings.Contains(text.String(), pw) {
		t.Fatalf("the plan shows the Secret's value:\n%s", text.String())
	}
}

// A chart that does not render fails the upgrade with the same message,
// planned or not.
func TestPreviewRenderErrorIsTheUpgradesFailure(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	var msgs []string
	for i, pv := range []*helm.Preview{nil, (&recorder{}).preview()} {
		rel := helm.Release{Name: fmt.Sprintf("broken%d", i), Namespace: ns}
		o := helm.ReconcileOptions{Spec: helm.Spec{Chart: ociChart("demo")}, Preview: pv}
		out, err := m.Reconcile(ctx, rel, o, helm.State{})
		if err != nil {
			t.Fatal(err)
		}
		o.Spec.Chart = ociChart("broken")
		out, err = m.Reconcile(ctx, rel, o, out.State)
		if err == nil {
			t.Fatal("the broken chart upgraded")
		}
		if out.State.UpgradeFailures != 1 {
			t.Fatalf("preview %v: upgrade failures %d, want 1", pv != nil, out.State.UpgradeFailures)
		}
		msgs = append(msgs, strings.ReplaceAll(err.Error(), rel.Name, "REL"))
	}
	if msgs[0] != msgs[1] {
		t.Fatalf("messages differ:\nwithout a plan: %s\nwith a plan:    %s", msgs[0], msgs[1])
	}
}

// One upgrade per risk code, each planned against a real API server and
// held: the plan names the code and the object, and nothing changes. A
// harmless change (an image tag) has no risk.
func TestPreviewNamesEachRisk(t *testing.T) {
	chart := helm.Chart{Ref: "oci://" + reg.Host() + "/charts/risks", Version: "0.1.0", Registry: oci.Registry{PlainHTTP: true}}
	cases := []struct {
		name          string
		before, after map[string]any
		setup         func(t *testing.T, ns string)
		code          plan.Code
		kind, object  string // object: a name, with REL for the release's
	}{
		{name: "immutable", after: values("serviceName", "db2"), code: plan.ImmutableChange, kind: "StatefulSet", object: "REL-db"},
		{name: "dataloss", before: values("pvc", true), after: values("pvc", false), code: plan.DataLoss, kind: "PersistentVolumeClaim", object: "REL-data"},
		{name: "crdversion", before: values("crdVersions", []any{"v1alpha1"}), after: values("crdVersions", []any{"v1"}),
			code: plan.CRDVersionRemoval, kind: "CustomResourceDefinition", object: "widgets.REL.example.com"},
		{name: "ownership", after: values("shared", "taken"), code: plan.OwnershipChange, kind: "ConfigMap", object: "taken",
			setup: func(t *testing.T, ns string) {
				cm := &corev1.ConfigMap{}
				cm.Name, cm.Namespace = "taken", ns
				cm.Annotations = map[string]string{"meta.helm.sh/release-name": "other", "meta.helm.sh/release-namespace": ns}
				if err := cp.Client.Create(context.Background(), cm); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "hooks", after: values("hook", true), code: plan.Hooks, kind: "ConfigMap", object: "REL-migrate"},
		{name: "harmless", after: values("image", "registry.k8s.io/pause:3.9")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := testContext(t)
			ns := cp.Namespace(t)
			m := newManager(t, helm.Options{})
			relName := "risk-" + c.name + "-" + ns[2:]
			rel := helm.Release{Name: relName, Namespace: ns}
			rec := &recorder{hold: true}
			o := helm.ReconcileOptions{Spec: helm.Spec{Chart: chart, Wait: helm.WaitNone}, Preview: rec.preview()}
			if c.before != nil {
				o.Spec.Values = []map[string]any{c.before}
			}
			out, err := m.Reconcile(ctx, rel, o, helm.State{})
			if err != nil {
				t.Fatal(err)
			}
			if c.setup != nil {
				c.setup(t, ns)
			}
			o.Spec.Values = append(o.Spec.Values, c.after)
			out, err = m.Reconcile(ctx, rel, o, out.State)
			p := rec.last(t)
			if c.code == "" {
				if err != nil || len(p.Risks) != 0 || out.Release.Revision != 2 {
					t.Fatalf("harmless change: risks %+v, revision %d, %v; want none, applied", p.Risks, out.Release.Revision, err)
				}
				return
			}
			want := strings.ReplaceAll(c.object, "REL", relName)
			found := false
			for _, r := range risksOf(p, c.code) {
				found = found || r.Object.Kind == c.kind && r.Object.Name == want && r.Message != ""
			}
			if !found {
				t.Fatalf("no %s risk on %s %s: %+v", c.code, c.kind, want, p.Risks)
			}
			if c.code == plan.Hooks {
				// Information only: the upgrade runs.
				if err != nil || out.Release.Revision != 2 {
					t.Fatalf("upgrade with a hook: revision %d, %v", out.Release.Revision, err)
				}
				return
			}
			if !errors.Is(err, helm.ErrHeld) || out.Release.Revision != 1 {
				t.Fatalf("risky upgrade: revision %d, %v; want held at 1", out.Release.Revision, err)
			}
		})
	}
}
