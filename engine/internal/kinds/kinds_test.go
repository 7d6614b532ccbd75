package kinds

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestTableTypes: each entry's Go types are its kind's, and Of finds the
// entry of each.
func TestTableTypes(t *testing.T) {
	for _, k := range All() {
		obj, list := k.New(), k.NewList()
		if name := reflect.TypeOf(obj).Elem().Name(); name != k.Name {
			t.Errorf("%s: New returns a %s", k.Name, name)
		}
		if name := reflect.TypeOf(list).Elem().Name(); name != k.Name+"List" {
			t.Errorf("%s: NewList returns a %s", k.Name, name)
		}
		if got, ok := Of(obj); !ok || got.Name != k.Name {
			t.Errorf("Of(%T) = %q, %v", obj, got.Name, ok)
		}
		if k.Status == nil {
			t.Errorf("%s: no status accessor", k.Name)
		}
	}
	if _, ok := Get("Deployment"); ok {
		t.Error("Get found a kind the engine does not know")
	}
}

// TestKindSets: the sets the rooms read, as the switches they replace
// listed them.
func TestKindSets(t *testing.T) {
	sets := map[string]struct {
		match func(Kind) bool
		want  []string
	}{
		"reconciled": {func(k Kind) bool { return k.Reconciled }, []string{"GitRepository", "OCIRepository", "Bucket", "HelmRepository", "HelmChart", "Kustomization", "HelmRelease", "ArtifactGenerator"}},
		"artifact":   {func(k Kind) bool { return k.Artifact }, []string{"GitRepository", "OCIRepository", "Bucket", "HelmChart", "ExternalArtifact"}},
		"dependable": {func(k Kind) bool { return k.Dependable }, []string{"GitRepository", "OCIRepository", "Kustomization", "HelmRelease", "ArtifactGenerator", "ExternalArtifact"}},
		"backoff":    {func(k Kind) bool { return k.Backoff }, []string{"GitRepository", "OCIRepository", "Bucket", "HelmRepository", "HelmChart", "HelmRelease"}},
		"sharded":    {func(k Kind) bool { return k.Sharded }, []string{"HelmRelease"}},
		"dependsOn":  {func(k Kind) bool { return k.DependsOn != nil }, []string{"Kustomization", "HelmRelease"}},
		"configs":    {func(k Kind) bool { return k.Configs != nil }, []string{"Kustomization", "HelmRelease"}},
		"quiet":      {func(k Kind) bool { return k.QuietMissingSource }, []string{"Kustomization", "HelmRelease"}},
		"interned":   {func(k Kind) bool { return k.intern != nil }, []string{"HelmChart", "HelmRelease"}},
	}
	for name, s := range sets {
		got := Names(s.match)
		slices.Sort(got)
		slices.Sort(s.want)
		if !slices.Equal(got, s.want) {
			t.Errorf("%s: %v, want %v", name, got, s.want)
		}
	}
}

// TestEventActions: the action of each kind's Events by reason, as Flux
// 2.10's controllers name them.
func TestEventActions(t *testing.T) {
	for _, c := range []struct{ kind, reason, want string }{
		{"GitRepository", meta.ArtifactFailedReason, string(sourcev1.ActionReconcile)},
		{"HelmChart", meta.BuildFailedReason, string(sourcev1.ActionReconcile)},
		{"Kustomization", meta.DependencyNotReadyReason, string(kustomizev1.ActionCheckDependencies)},
		{"Kustomization", meta.ArtifactFailedReason, string(kustomizev1.ActionResolveSource)},
		{"Kustomization", meta.HealthCheckFailedReason, string(kustomizev1.ActionHealthCheck)},
		{"Kustomization", "ValuesError", string(kustomizev1.ActionReconcile)},
		{"Kustomization", meta.ReconciliationSucceededReason, string(kustomizev1.ActionReconcile)},
		{"HelmRelease", "ValuesError", string(helmv2.ActionResolveValues)},
		{"HelmRelease", meta.DependencyNotReadyReason, string(kustomizev1.ActionCheckDependencies)},
		{"HelmRelease", meta.HealthCheckFailedReason, string(kustomizev1.ActionHealthCheck)},
		{"ArtifactGenerator", meta.BuildFailedReason, string(swv1beta1.ActionBuild)},
		{"ArtifactGenerator", meta.ArtifactFailedReason, string(kustomizev1.ActionResolveSource)},
		{"ArtifactGenerator", meta.DependencyNotReadyReason, string(kustomizev1.ActionReconcile)},
		{"ArtifactGenerator", meta.HealthCheckFailedReason, string(kustomizev1.ActionReconcile)},
		{"Alert", meta.ArtifactFailedReason, string(sourcev1.ActionReconcile)},
	} {
		if got := EventAction(c.kind, c.reason); got != c.want {
			t.Errorf("EventAction(%s, %s) = %q, want %q", c.kind, c.reason, got, c.want)
		}
	}
}

// TestRevisionAndConfigs: what the status and spec accessors read.
func TestRevisionAndConfigs(t *testing.T) {
	git := &sourcev1.GitRepository{Status: sourcev1.GitRepositoryStatus{Artifact: &meta.Artifact{Revision: "main@sha1:abc"}}}
	ks := &kustomizev1.Kustomization{Status: kustomizev1.KustomizationStatus{LastAttemptedRevision: "v1"}}
	for _, c := range []struct {
		obj  client.Object
		want string
	}{{git, "main@sha1:abc"}, {ks, "v1"}, {&sourcev1.Bucket{}, ""}, {&swv1beta1.ArtifactGenerator{}, ""}} {
		if got := Revision(c.obj); got != c.want {
			t.Errorf("%T: revision %q, want %q", c.obj, got, c.want)
		}
	}
	hr := &helmv2.HelmRelease{Spec: helmv2.HelmReleaseSpec{
		ValuesFrom: []helmv2.ValuesReference{{Kind: "ConfigMap", Name: "values"}, {Kind: "Secret", Name: "secret"}, {Kind: "Other", Name: "x"}},
		KubeConfig: &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: "kubeconfig"}},
	}}
	k, _ := Of(hr)
	var got []string
	for _, c := range k.Configs(hr) {
		got = append(got, c.Kind+"/"+c.Name)
	}
	if want := "ConfigMap/values,Secret/secret,Secret/kubeconfig"; strings.Join(got, ",") != want {
		t.Errorf("HelmRelease configs %v, want %s", got, want)
	}
}
