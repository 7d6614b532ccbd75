package plan_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/plan"
)

func objs(t *testing.T, docs ...string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			t.Fatalf("%v\n%s", err, d)
		}
		out = append(out, u)
	}
	return out
}

// filer is a SeaweedFS filer StatefulSet named name, as the chart's v1
// (named after the chart) and v2 (after the release) render it.
func filer(name, image string) string {
	return `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: ` + name + `, namespace: storage}
spec:
  serviceName: ` + name + `
  replicas: 1
  selector: {matchLabels: {app.kubernetes.io/name: seaweedfs, app.kubernetes.io/component: filer}}
  template:
    metadata: {labels: {app.kubernetes.io/name: seaweedfs, app.kubernetes.io/component: filer}}
    spec: {containers: [{name: filer, image: ` + image + `}]}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`
}

const s3Service = `
apiVersion: v1
kind: Service
metadata: {name: seaweedfs-s3, namespace: storage}
spec:
  selector: {app.kubernetes.io/name: seaweedfs, app.kubernetes.io/component: filer}
  ports: [{port: 8333}]
`

func codes(p *plan.Plan) []string {
	var out []string
	for _, r := range p.Risks {
		out = append(out, string(r.Code)+" "+r.Object.String())
	}
	return out
}

func action(p *plan.Plan, ref string) plan.Action {
	for _, o := range p.Objects {
		if o.Ref.String() == ref {
			return o.Action
		}
	}
	return ""
}

// TestSeaweedFSRename: the chart's StatefulSet renamed after the release,
// same pod labels, under a Service selecting them: the new one is a
// duplicate of the one going, on new, empty volumes, and the Service sends
// traffic to both.
func TestSeaweedFSRename(t *testing.T) {
	p, err := plan.Compute(plan.Input{
		Current: objs(t, filer("seaweedfs-filer", "seaweedfs:4.0.405"), s3Service),
		Desired: objs(t, filer("myrel-seaweedfs-filer", "seaweedfs:4.31.0"), s3Service),
	})
	if err != nil {
		t.Fatal(err)
	}
	if a := action(p, "StatefulSet/storage/myrel-seaweedfs-filer"); a != plan.Create {
		t.Errorf("new filer: %s", a)
	}
	if a := action(p, "StatefulSet/storage/seaweedfs-filer"); a != plan.Delete {
		t.Errorf("old filer: %s", a)
	}
	want := []string{"DuplicateWorkload Service/storage/seaweedfs-s3", "DuplicateWorkload StatefulSet/storage/myrel-seaweedfs-filer"}
	if got := codes(p); !slices.Equal(got, want) {
		t.Fatalf("risks %v, want %v", got, want)
	}
	for _, r := range p.Risks {
		if r.Object.Kind == "StatefulSet" && !strings.Contains(r.Message, "data-myrel-seaweedfs-filer-0") {
			t.Errorf("the message does not name the new, empty claim: %s", r.Message)
		}
	}
	if !p.Risky() || !p.Changed() {
		t.Errorf("Risky %v, Changed %v", p.Risky(), p.Changed())
	}
}

// TestHarmlessUpgrade: an image tag changes: an update with that one field,
// no risk.
func TestHarmlessUpgrade(t *testing.T) {
	live := objs(t, filer("seaweedfs-filer", "seaweedfs:4.0.405"))[0]
	// What the API server defaults stays out of the diff.
	unstructured.SetNestedField(live.Object, "OrderedReady", "spec", "podManagementPolicy")
	unstructured.SetNestedField(live.Object, "12", "metadata", "resourceVersion")
	unstructured.SetNestedField(live.Object, map[string]any{"replicas": int64(1)}, "status")
	p, err := plan.Compute(plan.Input{
		Current: objs(t, filer("seaweedfs-filer", "seaweedfs:4.0.405")),
		Desired: objs(t, filer("seaweedfs-filer", "seaweedfs:4.0.406")),
		Live:    func(plan.Ref) *unstructured.Unstructured { return live },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Risks) != 0 || p.Risky() {
		t.Errorf("risks %v", codes(p))
	}
	o := p.Objects[0]
	if o.Action != plan.Update || len(o.Changes) != 1 || o.Changes[0].Path != "spec.template.spec.containers[0].image" ||
		o.Changes[0].Old != `"seaweedfs:4.0.405"` || o.Changes[0].New != `"seaweedfs:4.0.406"` {
		t.Errorf("plan %+v", o)
	}
}

func TestUnchanged(t *testing.T) {
	cur := objs(t, s3Service)
	p, err := plan.Compute(plan.Input{Current: cur, Desired: objs(t, s3Service)})
	if err != nil {
		t.Fatal(err)
	}
	if p.Changed() || p.Objects[0].Action != plan.Unchanged {
		t.Errorf("plan %+v", p.Objects)
	}
}

// TestRisks: one case per risk code, each with the object it names.
func TestRisks(t *testing.T) {
	dep := func(sel string) string {
		return `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: app}
spec:
  selector: {matchLabels: {app: ` + sel + `}}
  template: {metadata: {labels: {app: ` + sel + `}}, spec: {containers: [{name: web, image: nginx}]}}
`
	}
	claim := func(class, size string) string {
		return `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: app}
spec: {storageClassName: ` + class + `, accessModes: [ReadWriteOnce], resources: {requests: {storage: ` + size + `}}}
`
	}
	svc := func(ip string) string {
		return `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: app}
spec: {clusterIP: ` + ip + `, ports: [{port: 80}]}
`
	}
	job := func(image string) string {
		return `
apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: app}
spec: {template: {spec: {restartPolicy: Never, containers: [{name: m, image: ` + image + `}]}}}
`
	}
	crd := func(versions string, stored string) string {
		return `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {plural: widgets, kind: Widget}
  scope: Namespaced
  versions: ` + versions + `
status: {storedVersions: ` + stored + `}
`
	}
	const ns = `
apiVersion: v1
kind: Namespace
metadata: {name: tenant}
`
	const kept = `
apiVersion: v1
kind: ConfigMap
metadata: {name: state, namespace: app, annotations: {helm.sh/resource-policy: keep}}
data: {a: b}
`
	const foreign = `
apiVersion: v1
kind: ConfigMap
metadata:
  name: shared
  namespace: app
  annotations: {meta.helm.sh/release-name: other, meta.helm.sh/release-namespace: app}
data: {a: b}
`
	const hook = `
apiVersion: batch/v1
kind: Job
metadata:
  name: pre-upgrade
  namespace: app
  annotations: {helm.sh/hook: pre-upgrade, helm.sh/hook-delete-policy: before-hook-creation}
spec: {template: {spec: {restartPolicy: Never, containers: [{name: m, image: busybox}]}}}
`
	for _, c := range []struct {
		name             string
		current, desired []string
		live             []string
		hooks            []string
		kept             bool
		want             []string
	}{
		{name: "StatefulSet serviceName", current: []string{filer("f", "a")},
			desired: []string{strings.Replace(filer("f", "a"), "serviceName: f", "serviceName: g", 1)},
			want:    []string{"ImmutableChange StatefulSet/storage/f"}},
		{name: "StatefulSet replicas and image", current: []string{filer("f", "a")},
			desired: []string{strings.Replace(filer("f", "b"), "replicas: 1", "replicas: 3", 1)}},
		{name: "Deployment selector", current: []string{dep("web")}, desired: []string{dep("web2")},
			want: []string{"ImmutableChange Deployment/app/web"}},
		{name: "Job template", current: []string{job("a")}, desired: []string{job("b")},
			want: []string{"ImmutableChange Job/app/migrate"}},
		{name: "PVC grows", current: []string{claim("fast", "1Gi")}, desired: []string{claim("fast", "2Gi")}},
		{name: "PVC class", current: []string{claim("fast", "1Gi")}, desired: []string{claim("slow", "1Gi")},
			want: []string{"ImmutableChange PersistentVolumeClaim/app/data"}},
		{name: "Service clusterIP", current: []string{svc("10.0.0.1")}, desired: []string{svc("10.0.0.2")},
			want: []string{"ImmutableChange Service/app/web"}},
		{name: "PVC deleted", current: []string{claim("fast", "1Gi")}, want: []string{"DataLoss PersistentVolumeClaim/app/data"}},
		{name: "Namespace deleted", current: []string{ns}, want: []string{"DataLoss Namespace/tenant"}},
		{name: "kept object deleted", current: []string{kept}, want: []string{"DataLoss ConfigMap/app/state"}},
		{name: "kept object orphaned", current: []string{kept}, kept: true},
		{name: "CRD drops a stored version",
			current: []string{crd(`[{name: v1alpha1, served: true, storage: false}, {name: v1, served: true, storage: true}]`, `[v1alpha1, v1]`)},
			desired: []string{crd(`[{name: v1, served: true, storage: true}]`, `[]`)},
			want:    []string{"CRDVersionRemoval CustomResourceDefinition/widgets.example.com"}},
		{name: "CRD drops a version nothing is stored in",
			current: []string{crd(`[{name: v1alpha1, served: true, storage: false}, {name: v1, served: true, storage: true}]`, `[v1]`)},
			desired: []string{crd(`[{name: v1, served: true, storage: true}]`, `[]`)}},
		{name: "another release's object", live: []string{foreign}, desired: []string{foreign},
			want: []string{"OwnershipChange ConfigMap/app/shared"}},
		{name: "hooks", current: []string{dep("web")}, desired: []string{dep("web")}, hooks: []string{hook},
			want: []string{"Hooks Job/app/pre-upgrade"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := plan.Input{Current: objs(t, c.current...), Desired: objs(t, c.desired...), Hooks: objs(t, c.hooks...),
				Owner: plan.Owner{Release: "app/web"}}
			if c.live != nil {
				live := map[plan.Ref]*unstructured.Unstructured{}
				for _, u := range objs(t, c.live...) {
					live[plan.RefOf(u)] = u
				}
				in.Live = func(r plan.Ref) *unstructured.Unstructured { return live[r] }
			}
			if c.kept {
				in.Kept = func(u *unstructured.Unstructured) bool {
					return u.GetAnnotations()["helm.sh/resource-policy"] == "keep"
				}
			}
			p, err := plan.Compute(in)
			if err != nil {
				t.Fatal(err)
			}
			if got := codes(p); !slices.Equal(got, c.want) {
				t.Errorf("risks %v, want %v", got, c.want)
			}
			if c.kept && action(p, "ConfigMap/app/state") != plan.Orphan {
				t.Errorf("kept object: %s", action(p, "ConfigMap/app/state"))
			}
			for _, r := range p.Risks {
				if r.Message == "" || !strings.Contains(r.Message, r.Object.Name) {
					t.Errorf("risk %s: message %q does not name the object", r.Code, r.Message)
				}
			}
		})
	}
}

// TestSecretsRedacted: a Secret's values appear nowhere in a plan, its
// changed keys do.
func TestSecretsRedacted(t *testing.T) {
	secret := func(pw string) string {
		return `
apiVersion: v1
kind: Secret
metadata: {name: db, namespace: app}
stringData: {password: ` + pw + `}
`
	}
	live := objs(t, `
apiVersion: v1
kind: Secret
metadata: {name: db, namespace: app}
data: {password: b2xkLXMzY3JldA==}
`)[0] // old-s3cret
	p, err := plan.Compute(plan.Input{Desired: objs(t, secret("new-s3cret")), Live: func(plan.Ref) *unstructured.Unstructured { return live }})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(p)
	for _, s := range []string{"s3cret", "b2xkLXMzY3JldA", "bmV3LXMzY3JldA"} {
		if strings.Contains(string(b), s) {
			t.Errorf("the plan holds %q: %s", s, b)
		}
	}
	o := p.Objects[0]
	if o.Action != plan.Update || len(o.Changes) != 1 || o.Changes[0].Path != "data.password" || o.Changes[0].New != plan.Redacted {
		t.Errorf("plan %+v", o)
	}
	// The same password: no change.
	p, _ = plan.Compute(plan.Input{Desired: objs(t, secret("old-s3cret")), Live: func(plan.Ref) *unstructured.Unstructured { return live }})
	if p.Changed() {
		t.Errorf("unchanged Secret planned as %+v", p.Objects)
	}
}

// TestHash: the same state gives the same hash, a new one another.
func TestHash(t *testing.T) {
	in := func(image string) plan.Input {
		return plan.Input{Current: objs(t, filer("f", "a")), Desired: objs(t, filer("f", image), s3Service)}
	}
	a, _ := plan.Compute(in("b"))
	b, _ := plan.Compute(in("b"))
	c, _ := plan.Compute(in("c"))
	if a.Hash != b.Hash || a.Hash == c.Hash || !strings.HasPrefix(a.Hash, "sha256:") {
		t.Errorf("hashes %s %s %s", a.Hash, b.Hash, c.Hash)
	}
}

// An object given twice (a chart's CRD in crds/ and in its templates) is
// planned once, as the last one given.
func TestRenderedTwice(t *testing.T) {
	second := objs(t, s3Service)[0]
	second.SetLabels(map[string]string{"second": "yes"})
	p, err := plan.Compute(plan.Input{Desired: append(objs(t, s3Service), second)})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Objects) != 1 || p.Objects[0].Action != plan.Create {
		t.Fatalf("objects %+v, want one create", p.Objects)
	}
	live := objs(t, s3Service)[0]
	p, err = plan.Compute(plan.Input{Current: []*unstructured.Unstructured{live}, Desired: append(objs(t, s3Service), second)})
	if err != nil || len(p.Objects) != 1 || p.Objects[0].Action != plan.Update || !strings.HasPrefix(p.Objects[0].Changes[0].Path, "metadata.labels") {
		t.Fatalf("objects %+v (%v), want the last one's label as the update", p.Objects, err)
	}
}

// TestText: the text form, the summary and the exit code of the SeaweedFS
// rename.
func TestText(t *testing.T) {
	p, err := plan.Compute(plan.Input{
		Current: objs(t, filer("seaweedfs-filer", "a"), s3Service),
		Desired: objs(t, filer("myrel-seaweedfs-filer", "a"), s3Service),
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := p.WriteText(&b, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"+ create StatefulSet/storage/myrel-seaweedfs-filer\n",
		"- delete StatefulSet/storage/seaweedfs-filer\n",
		"risk DuplicateWorkload StatefulSet/storage/myrel-seaweedfs-filer: ",
		"plan sha256:",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "unchanged") {
		t.Errorf("unchanged objects listed:\n%s", b.String())
	}
	if s := p.Summary(); !strings.Contains(s, "1 create, 1 delete, 1 unchanged; risks: DuplicateWorkload Service/storage/seaweedfs-s3, DuplicateWorkload StatefulSet/storage/myrel-seaweedfs-filer") {
		t.Errorf("summary %q", s)
	}
	if p.ExitCode() != plan.ExitRisky {
		t.Errorf("exit code %d", p.ExitCode())
	}
	same, _ := plan.Compute(plan.Input{Current: objs(t, s3Service), Desired: objs(t, s3Service)})
	if same.ExitCode() != plan.ExitUnchanged {
		t.Errorf("exit code of no change %d", same.ExitCode())
	}
}

// TestDryRunRemovals: with dry-run results, a field the apply removes is a
// change; with rendered objects it is not the new state's to change.
func TestDryRunRemovals(t *testing.T) {
	live := objs(t, `
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: app, annotations: {old: "1"}}
data: {a: "1", b: "2"}
`)[0]
	desired := objs(t, `
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: app}
data: {a: "1"}
`)
	at := func(plan.Ref) *unstructured.Unstructured { return live }
	p, _ := plan.Compute(plan.Input{Desired: desired, Live: at})
	if p.Changed() {
		t.Errorf("rendered: %+v", p.Objects)
	}
	p, _ = plan.Compute(plan.Input{Desired: desired, Live: at, DryRun: func(plan.Ref) bool { return true }})
	o := p.Objects[0]
	if o.Action != plan.Update || len(o.Changes) != 2 || o.Changes[0].Path != "data.b" || o.Changes[0].Old != `"2"` || o.Changes[0].New != "" ||
		o.Changes[1].Path != "metadata.annotations" {
		t.Errorf("dry run: %+v", o)
	}
}
