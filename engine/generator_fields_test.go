package engine_test

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// The ArtifactGenerator fields of source-watcher v2.2 and v2.3 (Flux 2.9
// and 2.10): pathPattern with captures in names, namespaces and paths,
// artifacts in another namespace under a ServiceAccount checked by
// SubjectAccessReview, commonMetadata, inputsFrom into the
// ExternalArtifact's status.exportedInputs, optional copies, outputs that
// go when the spec drops them, and the finalizer that deletes them with
// the generator.
func TestArtifactGeneratorFlux210Fields(t *testing.T) {
	ctx := context.Background()
	ns, other := cp.Namespace(t), cp.Namespace(t)
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if _, err := reg.PushArtifact(ctx, "manifests/apps", "v1", map[string]string{
		"apps/frontend/cm.yaml":     configMap("frontend", other),
		"apps/frontend/inputs.yaml": "replicas: 2\ntier: web\n",
		"apps/Backend/cm.yaml":      configMap("backend", other),
		"apps/Backend/inputs.yaml":  "replicas: 1\nports: [8080]\n",
		"README.md":                 "not an app",
	}, nil); err != nil {
		t.Fatal(err)
	}
	startEngine(t, engine.Options{})
	const sa = "generator"
	if err := cp.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	src := manifestSource(ns, "apps", "oci://"+reg.Host()+"/manifests/apps", "v1")
	gen := &swv1beta1.ArtifactGenerator{
		ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: ns},
		Spec: swv1beta1.ArtifactGeneratorSpec{
			CommonMetadata:     &swv1beta1.CommonMetadata{Labels: map[string]string{"team": "platform"}, Annotations: map[string]string{"owner": "ops"}},
			ServiceAccountName: sa,
			Sources:            []swv1beta1.SourceReference{{Alias: "src", Kind: sourcev1.OCIRepositoryKind, Name: "apps"}},
			PathPattern:        "@src/apps/{app}",
			OutputArtifacts: []swv1beta1.OutputArtifact{{
				Name:       "{app}-manifests",
				Namespace:  other,
				InputsFrom: "@artifact/inputs.yaml",
				Copy: []swv1beta1.CopyOperation{
					{From: "@src/apps/{app}/*.yaml", To: "@artifact/"},
					{From: "@src/apps/{app}/*.json", To: "@artifact/", Optional: true},
				},
			}},
		},
	}
	for _, o := range []client.Object{src, gen} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The ServiceAccount may not write ExternalArtifacts in the target
	// namespace yet: nothing is generated, and Ready says why.
	waitFor(t, gen, func() bool {
		r := conditions.Get(gen, meta.ReadyCondition)
		return r != nil && r.Status == metav1.ConditionFalse && r.Reason == swv1beta1.AccessDeniedReason
	}, "Ready=False AccessDenied")
	if msg := conditions.GetMessage(gen, meta.ReadyCondition); !strings.Contains(msg, "ServiceAccount "+ns+"/"+sa) || !strings.Contains(msg, other) {
		t.Fatalf("AccessDenied message %q names neither the account nor the namespace", msg)
	}
	if !controllerutilContains(gen.Finalizers, swv1beta1.Finalizer) {
		t.Fatalf("finalizers %v, want %s", gen.Finalizers, swv1beta1.Finalizer)
	}
	eas := &sourcev1.ExternalArtifactList{}
	if err := cp.Client.List(ctx, eas, client.InNamespace(other)); err != nil || len(eas.Items) != 0 {
		t.Fatalf("ExternalArtifacts before access: %d (%v)", len(eas.Items), err)
	}

	// Granted, the generator writes one artifact per app directory.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "artifacts", Namespace: other}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{sourcev1.GroupVersion.Group}, Resources: []string{"externalartifacts"}, Verbs: []string{"create", "update", "delete"},
	}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "artifacts", Namespace: other},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "artifacts"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}}
	for _, o := range []client.Object{role, binding} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	requestReconcile(t, gen)
	waitFor(t, gen, readyIs(gen, true), "Ready=True")
	if len(gen.Status.Inventory) != 2 {
		t.Fatalf("inventory %+v, want the two apps", gen.Status.Inventory)
	}
	want := map[string]string{"frontend-manifests": `{"replicas":2,"tier":"web"}`, "backend-manifests": `{"ports":[8080],"replicas":1}`}
	for name, inputs := range want {
		ea := &sourcev1.ExternalArtifact{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: other}}
		waitFor(t, ea, func() bool { return ea.Status.Artifact != nil && conditions.IsReady(ea) }, "an artifact")
		got, _ := json.Marshal(ea.Status.ExportedInputs)
		if string(got) != inputs {
			t.Errorf("%s exportedInputs %s, want %s", name, got, inputs)
		}
		app := strings.TrimSuffix(name, "-manifests")
		if ea.Labels["team"] != "platform" || ea.Annotations["owner"] != "ops" || ea.Labels["app"] != app ||
			ea.Labels[swv1beta1.ArtifactGeneratorLabel] != string(gen.UID) || ea.Labels["app.kubernetes.io/managed-by"] != "source-watcher" {
			t.Errorf("%s labels %v annotations %v", name, ea.Labels, ea.Annotations)
		}
		if sr := ea.Spec.SourceRef; sr == nil || sr.Name != gen.Name || sr.Namespace != ns || sr.APIVersion != swv1beta1.GroupVersion.String() {
			t.Errorf("%s sourceRef %+v", name, sr)
		}
	}

	// An ExternalArtifact of that name that another source owns is not
	// taken over.
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(gen), gen); err != nil {
		t.Fatal(err)
	}
	foreign := &sourcev1.ExternalArtifact{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: other}}
	if err := cp.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	gen.Spec.PathPattern = ""
	gen.Spec.OutputArtifacts = []swv1beta1.OutputArtifact{
		{Name: "taken", Namespace: other, Copy: []swv1beta1.CopyOperation{{From: "@src/README.md", To: "@artifact/"}}},
	}
	if err := cp.Client.Update(ctx, gen); err != nil {
		t.Fatal(err)
	}
	waitFor(t, gen, func() bool {
		r := conditions.Get(gen, meta.ReadyCondition)
		return r != nil && r.Status == metav1.ConditionFalse && r.Reason == swv1beta1.OwnershipConflictReason && r.ObservedGeneration == gen.Generation
	}, "Ready=False OwnershipConflict")

	// The spec drops the apps: their ExternalArtifacts go.
	gen.Spec.OutputArtifacts[0].Name = "readme"
	if err := cp.Client.Update(ctx, gen); err != nil {
		t.Fatal(err)
	}
	waitFor(t, gen, func() bool { return conditions.IsReady(gen) && len(gen.Status.Inventory) == 1 }, "only the readme")
	for name := range want {
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: other, Name: name}, &sourcev1.ExternalArtifact{}); !apierrors.IsNotFound(err) {
			t.Errorf("ExternalArtifact %s after the spec dropped it: %v", name, err)
		}
	}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(foreign), foreign); err != nil {
		t.Fatalf("the foreign ExternalArtifact: %v", err)
	}

	// Deleted, the generator takes its ExternalArtifacts with it.
	if err := cp.Client.Delete(ctx, gen); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		errGen := cp.Client.Get(ctx, client.ObjectKeyFromObject(gen), &swv1beta1.ArtifactGenerator{})
		errEA := cp.Client.Get(ctx, client.ObjectKey{Namespace: other, Name: "readme"}, &sourcev1.ExternalArtifact{})
		if apierrors.IsNotFound(errGen) && apierrors.IsNotFound(errEA) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after deletion: generator %v, its ExternalArtifact %v", errGen, errEA)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func controllerutilContains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// spec.managedNamespaces (source-watcher v2.3): the namespaces the outputs
// target are created, adopted and labelled with the metadata the spec
// builds (commonMetadata, a NamespaceMetadata file within its allowed
// schema, the from operations), only when allowedNames allows them and a
// ServiceAccount may manage them, and pruned once no output targets them.
func TestArtifactGeneratorManagedNamespaces(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	alpha, beta := ns+"-alpha", ns+"-beta"
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	tenant := func(name, tier string) map[string]string {
		return map[string]string{
			"tenants/" + name + "/cm.yaml": configMap(name, ns+"-"+name),
			"tenants/" + name + "/ns.yaml": "apiVersion: source.extensions.fluxcd.io/v1beta1\nkind: NamespaceMetadata\nmetadata:\n" +
				"  labels:\n    tier: " + tier + "\n    forbidden: \"yes\"\n  annotations:\n    contact: " + name + "@example.com\n",
		}
	}
	both := tenant("alpha", "gold")
	maps.Copy(both, tenant("beta", "silver"))
	for tag, files := range map[string]map[string]string{"v1": both, "v2": tenant("alpha", "gold")} {
		if _, err := reg.PushArtifact(ctx, "manifests/tenants", tag, files, nil); err != nil {
			t.Fatal(err)
		}
	}
	// A namespace that exists already is adopted.
	if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: alpha, Labels: map[string]string{"kept": "yes"}}}); err != nil {
		t.Fatal(err)
	}
	startEngine(t, engine.Options{})
	const sa = "tenants"
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create", "update", "delete"}},
		{APIGroups: []string{sourcev1.GroupVersion.Group}, Resources: []string{"externalartifacts"}, Verbs: []string{"create", "update", "delete"}},
	}
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-tenants"}, Rules: rules},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-tenants"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ns + "-tenants"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}},
	} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), o) })
	}
	src := manifestSource(ns, "tenants", "oci://"+reg.Host()+"/manifests/tenants", "v1")
	gen := &swv1beta1.ArtifactGenerator{
		ObjectMeta: metav1.ObjectMeta{Name: "tenants", Namespace: ns},
		Spec: swv1beta1.ArtifactGeneratorSpec{
			CommonMetadata: &swv1beta1.CommonMetadata{Labels: map[string]string{"team": "platform"}},
			Sources:        []swv1beta1.SourceReference{{Alias: "src", Kind: sourcev1.OCIRepositoryKind, Name: "tenants"}},
			PathPattern:    "@src/tenants/{tenant}",
			ManagedNamespaces: &swv1beta1.ManagedNamespaces{
				AllowedNames: []string{"ns.startsWith('" + ns + "-')"},
				Prune:        true,
				Metadata: &swv1beta1.ManagedNamespacesMetadata{
					FromSource: &swv1beta1.NamespaceMetadataFromSource{
						Path:               "@src/tenants/{tenant}/ns.yaml",
						AllowedLabels:      map[string]string{"tier": "value in ['gold', 'silver']"},
						AllowedAnnotations: map[string]string{"contact": "value.endsWith('@example.com')"},
					},
					From: []swv1beta1.NamespaceMetadataFrom{
						{Strategy: swv1beta1.OverrideStrategy, Namespace: "*", Labels: map[string]string{"env": "prod"}},
						{Strategy: swv1beta1.MergeStrategy, Namespace: alpha, Labels: map[string]string{"tier": "not-applied", "zone": "a"}},
					},
				},
			},
			OutputArtifacts: []swv1beta1.OutputArtifact{{
				Name: "{tenant}", Namespace: ns + "-{tenant}",
				Copy: []swv1beta1.CopyOperation{{From: "@src/tenants/{tenant}/cm.yaml", To: "@artifact/"}},
			}},
		},
	}
	for _, o := range []client.Object{src, gen} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// Without a ServiceAccount to authorize it, no namespace is managed.
	waitFor(t, gen, func() bool {
		r := conditions.Get(gen, meta.ReadyCondition)
		return r != nil && r.Reason == swv1beta1.ValidationFailedReason && conditions.IsStalled(gen)
	}, "Stalled ValidationFailed")
	if msg := conditions.GetMessage(gen, meta.ReadyCondition); !strings.Contains(msg, "ServiceAccount") {
		t.Fatalf("message %q does not say a ServiceAccount is needed", msg)
	}
	gen.Spec.ServiceAccountName = sa
	if err := cp.Client.Update(ctx, gen); err != nil {
		t.Fatal(err)
	}
	waitFor(t, gen, func() bool {
		return conditions.IsReady(gen) && conditions.GetObservedGeneration(gen, meta.ReadyCondition) == gen.Generation
	}, "Ready=True")
	kinds := map[string]int{}
	for _, e := range gen.Status.Inventory {
		kinds[e.Kind]++
	}
	if kinds[swv1beta1.NamespaceKind] != 2 || kinds[sourcev1.ExternalArtifactKind] != 2 {
		t.Fatalf("inventory %+v, want two namespaces and two artifacts", gen.Status.Inventory)
	}
	for name, want := range map[string]map[string]string{
		alpha: {"team": "platform", "tier": "gold", "env": "prod", "zone": "a", "kept": "yes"},
		beta:  {"team": "platform", "tier": "silver", "env": "prod"},
	} {
		got := &corev1.Namespace{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if got.Labels[k] != v {
				t.Errorf("namespace %s label %s=%q, want %q (labels %v)", name, k, got.Labels[k], v, got.Labels)
			}
		}
		if _, ok := got.Labels["forbidden"]; ok || got.Labels[swv1beta1.ArtifactGeneratorLabel] != string(gen.UID) {
			t.Errorf("namespace %s labels %v: a key outside the allowed schema, or not the generator's", name, got.Labels)
		}
		if got.Annotations["contact"] != strings.TrimPrefix(name, ns+"-")+"@example.com" {
			t.Errorf("namespace %s annotations %v", name, got.Annotations)
		}
		ea := &sourcev1.ExternalArtifact{ObjectMeta: metav1.ObjectMeta{Name: strings.TrimPrefix(name, ns+"-"), Namespace: name}}
		if !exists(t, ea) || ea.Status.Artifact == nil {
			t.Errorf("ExternalArtifact %s/%s: %+v", name, ea.Name, ea.Status)
		}
	}

	// The source drops beta: its artifact and, with prune, its namespace go.
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
		t.Fatal(err)
	}
	src.Spec.Reference.Tag = "v2"
	if err := cp.Client.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitFor(t, gen, func() bool { return conditions.IsReady(gen) && len(gen.Status.Inventory) == 2 }, "only alpha")
	if gone := (&corev1.Namespace{}); cp.Client.Get(ctx, client.ObjectKey{Name: beta}, gone) == nil && gone.DeletionTimestamp.IsZero() {
		t.Fatalf("namespace %s is still there after no output targets it", beta)
	}

	// A namespace allowedNames does not allow stalls the generator.
	gen.Spec.ManagedNamespaces.AllowedNames = []string{"ns == 'elsewhere'"}
	if err := cp.Client.Update(ctx, gen); err != nil {
		t.Fatal(err)
	}
	waitFor(t, gen, func() bool {
		return conditions.IsStalled(gen) && strings.Contains(conditions.GetMessage(gen, meta.ReadyCondition), alpha+" is not allowed")
	}, "Stalled naming the namespace")
}

// manifestSource is an OCIRepository of plain manifests at url:tag, over
// plain HTTP, checked hourly.
func manifestSource(ns, name, url, tag string) *sourcev1.OCIRepository {
	return &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: sourcev1.OCIRepositorySpec{
			URL: url, Insecure: true,
			Interval:  &metav1.Duration{Duration: time.Hour},
			Reference: &sourcev1.OCIRepositoryRef{Tag: tag},
		},
	}
}
