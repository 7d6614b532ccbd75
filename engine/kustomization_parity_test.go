package engine_test

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/envsubst"
	"github.com/fluxcd/pkg/runtime/conditions"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	"github.com/getsops/sops/v3/cmd/sops/formats"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/stores/dotenv"
	"github.com/getsops/sops/v3/stores/json"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/sopstest"
)

// parityFiles is a source that exercises the Kustomization fields that
// shape objects; ${greeting} is substituted after the build.
var parityFiles = map[string]string{
	"app/app.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: nginx:1.0
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  lower: ${greeting,,}
  replaced: ${greeting/World/Flux}
  escaped: $${greeting}
  defaulted: ${unset:=fallback}
  fromcm: ${fromcm:=unset}
  fromsecret: ${fromsecret:=unset}
  shared: ${shared:=unset}
`,
	"components/extra/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
resources: [extra.yaml]
`,
	"components/extra/extra.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: extra
data: {from: component}
`,
}

const (
	paritySMP  = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: not-used\nspec:\n  replicas: 3\n"
	parityJSON = "- op: add\n  path: /data/patched\n  value: by-json6902\n"
)

func paritySpec(ns string) kustomizev1.KustomizationSpec {
	return kustomizev1.KustomizationSpec{
		TargetNamespace: ns,
		NamePrefix:      "p-",
		NameSuffix:      "-s",
		Components:      []string{"../components/extra"},
		Patches: []kustomize.Patch{
			{Patch: paritySMP, Target: &kustomize.Selector{Kind: "Deployment", LabelSelector: "app=web"}},
			{Patch: parityJSON, Target: &kustomize.Selector{Kind: "ConfigMap", Name: "settings"}},
		},
		Images:         []kustomize.Image{{Name: "nginx", NewName: "registry.example/nginx", NewTag: "1.2"}},
		CommonMetadata: &kustomizev1.CommonMetadata{Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"owner": "x"}},
		PostBuild:      &kustomizev1.PostBuild{Substitute: map[string]string{"greeting": "Hello World"}},
	}
}

// parityCorpus is parityFiles plus SOPS-encrypted documents for id: a
// Secret manifest beside app.yaml, and an env file that the component's
// secretGenerator reads.
func parityCorpus(t *testing.T, ns string, id sopstest.Identity) map[string]string {
	files := map[string]string{}
	for p, c := range parityFiles {
		files[p] = c
	}
	enc := func(plain string, f formats.Format) string {
		return string(sopstest.Encrypt(t, []byte(plain), sopstest.Options{Format: f, Recipients: []string{id.Recipient},
			EncryptedRegex: "^(data|stringData)$"}))
	}
	files["app/secret.yaml"] = enc("apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  labels: {app: web}\ndata:\n  password: "+
		base64.StdEncoding.EncodeToString([]byte("parity-cleartext"))+"\n", formats.Yaml)
	files["components/extra/kustomization.yaml"] = `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
resources: [extra.yaml]
secretGenerator:
  - name: generated
    envs: [creds.env]
`
	files["components/extra/creds.env"] = enc("TOKEN=generated-cleartext\n", formats.Dotenv)
	return files
}

// sopsOpen decrypts a SOPS document with SOPS' own stores and local key
// service (the identity comes from SOPS_AGE_KEY), without the MAC check,
// as kustomize-controller decrypts.
func sopsOpen(t *testing.T, data []byte, f formats.Format) []byte {
	t.Helper()
	var store sops.Store = json.NewStore(&config.JSONStoreConfig{})
	if f == formats.Dotenv {
		store = dotenv.NewStore(&config.DotenvStoreConfig{})
	}
	tree, err := store.LoadEncryptedFile(data)
	if err != nil {
		t.Fatal(err)
	}
	key, err := tree.Metadata.GetDataKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.Decrypt(key, aes.NewCipher()); err != nil {
		t.Fatal(err)
	}
	out, err := store.EmitPlainFile(tree.Branches)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fluxSide computes the objects with the libraries Flux uses, without
// cozy-aio's code, in kustomize-controller's order: SOPS' own API decrypts
// the secretGenerator's env file, kustomize's own transformers build a
// hand-written overlay of the spec, SOPS decrypts each object with sops
// metadata, fluxcd/pkg/envsubst substitutes vars (substituteFrom merged
// under substitute) in each rendered object, and fluxcd/pkg/ssa's
// SetCommonMetadata adds commonMetadata, then Flux's owner labels.
func fluxSide(t *testing.T, ns, name string, spec kustomizev1.KustomizationSpec, files, vars map[string]string) []*unstructured.Unstructured {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(p, ".env") {
			content = string(sopsOpen(t, []byte(content), formats.Dotenv))
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	overlay := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
		"namespace": ns, "namePrefix": spec.NamePrefix, "nameSuffix": spec.NameSuffix,
		"resources":  []string{"app.yaml", "secret.yaml"},
		"components": spec.Components,
		"patches": []map[string]any{
			{"patch": paritySMP, "target": map[string]any{"kind": "Deployment", "labelSelector": "app=web"}},
			{"patch": parityJSON, "target": map[string]any{"kind": "ConfigMap", "name": "settings"}},
		},
		"images": []map[string]any{{"name": "nginx", "newName": "registry.example/nginx", "newTag": "1.2"}},
	}
	data, _ := yaml.Marshal(overlay)
	if err := os.WriteFile(filepath.Join(root, "app", "kustomization.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, "app"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, res := range rm.Resources() {
		if !res.Field("sops").IsNilOrEmpty() {
			js, err := res.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if err := res.UnmarshalJSON(sopsOpen(t, js, formats.Json)); err != nil {
				t.Fatal(err)
			}
		}
		y, err := res.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		s, err := envsubst.Eval(string(y), func(k string) (string, bool) { return vars[k], true })
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(s), &u.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	ssautils.SetCommonMetadata(out, spec.CommonMetadata.Labels, spec.CommonMetadata.Annotations)
	ssautils.SetCommonMetadata(out, map[string]string{"kustomize.toolkit.fluxcd.io/name": name, "kustomize.toolkit.fluxcd.io/namespace": ns}, nil)
	return out
}

// subsetDiff returns the paths where want has a value live does not equal.
func subsetDiff(path string, want, live any) []string {
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return []string{path}
		}
		var out []string
		for k, v := range w {
			out = append(out, subsetDiff(path+"."+k, v, l[k])...)
		}
		return out
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(w) {
			return []string{path}
		}
		var out []string
		for i := range w {
			out = append(out, subsetDiff(path+"[]", w[i], l[i])...)
		}
		return out
	}
	wj, _ := yaml.Marshal(want)
	lj, _ := yaml.Marshal(live)
	if !reflect.DeepEqual(wj, lj) {
		return []string{path + ": want " + strings.TrimSpace(string(wj)) + ", live " + strings.TrimSpace(string(lj))}
	}
	return nil
}

// TestKustomizationParityWithFlux applies a corpus that sets every
// object-shaping field of a Kustomization (patches strategic merge and
// JSON 6902 with target selectors, images, components, namePrefix and
// nameSuffix, targetNamespace, commonMetadata, postBuild substitute and
// substituteFrom, decryption of a SOPS manifest and of a secretGenerator
// env file) once, and compares each live object, field by field, with
// what Flux's libraries produce for the same spec.
func TestKustomizationParityWithFlux(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	id := sopstest.NewIdentity(t)
	// For the Flux side's SOPS key service only: cozy-aio never reads it.
	t.Setenv("SOPS_AGE_KEY", id.Secret)
	files := parityCorpus(t, ns, id)
	gitSource(t, ns, "parity", files)
	for _, o := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "vars", Namespace: ns},
			Data: map[string]string{"greeting": "from the ConfigMap", "fromcm": "cm-value", "shared": "cm"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "secret-vars", Namespace: ns},
			Data: map[string][]byte{"fromsecret": []byte("secret-value"), "shared": []byte("secret")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sops-age", Namespace: ns},
			Data: map[string][]byte{"identity.agekey": []byte(id.Secret)}},
	} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	startEngine(t, engine.Options{})
	ks := kustomization(ns, "parity", "parity", "./app")
	spec := paritySpec(ns)
	spec.Interval, spec.Path, spec.Prune, spec.SourceRef = ks.Spec.Interval, ks.Spec.Path, ks.Spec.Prune, ks.Spec.SourceRef
	spec.PostBuild.SubstituteFrom = []kustomizev1.SubstituteReference{{Kind: "ConfigMap", Name: "vars"}, {Kind: "Secret", Name: "secret-vars"}}
	spec.Decryption = &kustomizev1.Decryption{Provider: "sops", SecretRef: &meta.LocalObjectReference{Name: "sops-age"}}
	ks.Spec = spec
	if err := cp.Client.Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ks, readyIs(ks, true), "Ready=True")

	// substituteFrom in order, then substitute, later values winning.
	vars := map[string]string{"greeting": "from the ConfigMap", "fromcm": "cm-value", "shared": "secret", "fromsecret": "secret-value"}
	for k, v := range spec.PostBuild.Substitute {
		vars[k] = v
	}
	want := fluxSide(t, ns, "parity", spec, files, vars)
	if len(want) != 5 || len(ks.Status.Inventory.Entries) != 5 {
		t.Fatalf("Flux renders %d objects, the inventory holds %+v", len(want), ks.Status.Inventory)
	}
	for _, w := range want {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(w.GroupVersionKind())
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(w), live); err != nil {
			t.Fatalf("%s %s/%s as Flux names it: %v", w.GetKind(), w.GetNamespace(), w.GetName(), err)
		}
		if d := subsetDiff(w.GetKind()+"/"+w.GetName(), w.Object, live.Object); len(d) > 0 {
			t.Errorf("differs from Flux:\n%s", strings.Join(d, "\n"))
		}
	}
	// Spot checks that the corpus did exercise each field.
	cm := &corev1.ConfigMap{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "p-settings-s"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["lower"] != "hello world" || cm.Data["replaced"] != "Hello Flux" || cm.Data["escaped"] != "${greeting}" ||
		cm.Data["patched"] != "by-json6902" || cm.Labels["team"] != "a" || cm.Annotations["owner"] != "x" ||
		cm.Data["fromcm"] != "cm-value" || cm.Data["fromsecret"] != "secret-value" || cm.Data["shared"] != "secret" {
		t.Errorf("settings = %v %v %v", cm.Data, cm.Labels, cm.Annotations)
	}
	creds := &corev1.Secret{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "p-creds-s"}, creds); err != nil {
		t.Fatal(err)
	}
	if string(creds.Data["password"]) != "parity-cleartext" || creds.Labels["team"] != "a" {
		t.Errorf("creds = %q %v", creds.Data, creds.Labels)
	}
}

// TestKustomizationParityBadInputs checks the errors of the new fields:
// a patch whose target is not found, and a readyExpr that does not compile.
func TestKustomizationParityBadInputs(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	gitSource(t, ns, "bad", parityFiles)
	startEngine(t, engine.Options{})
	noTarget := kustomization(ns, "no-target", "bad", "./app")
	noTarget.Spec.Patches = []kustomize.Patch{{Patch: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: absent\ndata: {a: b}\n"}}
	badPath := kustomization(ns, "bad-json-path", "bad", "./app")
	badPath.Spec.Patches = []kustomize.Patch{{Patch: "- op: replace\n  path: /spec/nowhere/deep\n  value: 1\n", Target: &kustomize.Selector{Kind: "Deployment"}}}
	badExpr := kustomization(ns, "bad-expr", "bad", "./app")
	badExpr.Spec.DependsOn = []meta.DependencyReference{{Name: "no-target", ReadyExpr: "dep.status.conditions.exists(c, c.type == 'Ready' &&"}}
	for _, k := range []*kustomizev1.Kustomization{noTarget, badPath, badExpr} {
		if err := cp.Client.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		k      *kustomizev1.Kustomization
		reason string
		says   []string
	}{
		{noTarget, meta.BuildFailedReason, []string{"Kustomization/" + ns + "/no-target", "absent"}},
		{badPath, meta.BuildFailedReason, []string{"Kustomization/" + ns + "/bad-json-path", "/spec/nowhere/deep"}},
		{badExpr, meta.InvalidCELExpressionReason, []string{"Kustomization/" + ns + "/bad-expr", "spec.dependsOn[0]", "readyExpr", ":1:"}},
	} {
		k := tc.k
		waitFor(t, k, func() bool {
			return readyIs(k, false)() && conditions.GetReason(k, meta.ReadyCondition) == tc.reason &&
				containsAll(conditions.GetMessage(k, meta.ReadyCondition), tc.says)
		}, "Ready=False with reason "+tc.reason+" saying "+strings.Join(tc.says, ", "))
	}
}

// TestKustomizationDeletionPolicy deletes Kustomizations with Orphan (its
// objects stay although it prunes) and Delete (its objects go although it
// does not prune).
func TestKustomizationDeletionPolicy(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	gitSource(t, ns, "del", map[string]string{
		"orphan/cm.yaml": configMap("orphaned", ns),
		"delete/cm.yaml": configMap("deleted", ns),
	})
	startEngine(t, engine.Options{})
	orphan := kustomization(ns, "orphan", "del", "./orphan")
	orphan.Spec.DeletionPolicy = kustomizev1.DeletionPolicyOrphan
	del := kustomization(ns, "delete", "del", "./delete")
	del.Spec.Prune = false
	del.Spec.DeletionPolicy = kustomizev1.DeletionPolicyDelete
	for _, k := range []*kustomizev1.Kustomization{orphan, del} {
		if err := cp.Client.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
		waitFor(t, k, readyIs(k, true), "Ready=True")
		if err := cp.Client.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []*kustomizev1.Kustomization{orphan, del} {
		waitGone(t, k)
	}
	if !exists(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "orphaned", Namespace: ns}}) {
		t.Error("deletionPolicy Orphan deleted the inventory")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "deleted", Namespace: ns}}
	if exists(t, cm) && cm.DeletionTimestamp.IsZero() {
		t.Error("deletionPolicy Delete kept the inventory")
	}
}

func waitGone(t *testing.T, obj client.Object) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); exists(t, obj); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s is still there", obj.GetName())
		}
	}
}

// TestKustomizationReadyExpr checks that dependsOn[].readyExpr replaces
// the Ready check, as in Flux: a dependency that is not Ready admits a
// dependent whose expression holds, and holds back one whose does not.
func TestKustomizationReadyExpr(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	gitSource(t, ns, "src", map[string]string{"good/cm.yaml": configMap("good", ns)})
	startEngine(t, engine.Options{})
	base := kustomization(ns, "base", "src", "./nowhere") // never Ready
	pass := kustomization(ns, "pass", "src", "./good")
	pass.Spec.DependsOn = []meta.DependencyReference{{Name: "base", ReadyExpr: "dep.metadata.name == 'base' && self.metadata.name == 'pass'"}}
	hold := kustomization(ns, "hold", "src", "./good")
	hold.Spec.DependsOn = []meta.DependencyReference{{Name: "base", ReadyExpr: "dep.spec.path == './elsewhere'"}}
	for _, k := range []*kustomizev1.Kustomization{base, pass, hold} {
		if err := cp.Client.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, pass, readyIs(pass, true), "Ready=True through readyExpr")
	waitFor(t, hold, func() bool {
		return conditions.GetReason(hold, meta.ReadyCondition) == meta.DependencyNotReadyReason &&
			strings.Contains(conditions.GetMessage(hold, meta.ReadyCondition), "readyExpr")
	}, "DependencyNotReady naming the readyExpr")
}

// TestKustomizationRefusesSOPSSecretWithoutDecryption checks that, as in
// Flux, a SOPS-encrypted Secret is never applied with its ciphertext when
// the Kustomization configures no decryption, and that the message names
// the Secret without printing its data.
func TestKustomizationRefusesSOPSSecretWithoutDecryption(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	gitSource(t, ns, "enc", map[string]string{"app/secret.yaml": `apiVersion: v1
kind: Secret
metadata:
  name: creds
  namespace: ` + ns + `
stringData:
  password: ENC[AES256_GCM,data:c2VjcmV0,iv:aXY=,tag:dGFn,type:str]
sops:
  age:
    - recipient: age1qqqq
      enc: opaque
  version: 3.9.0
`})
	startEngine(t, engine.Options{})
	k := kustomization(ns, "enc", "enc", "./app")
	if err := cp.Client.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	waitFor(t, k, func() bool {
		msg := conditions.GetMessage(k, meta.ReadyCondition)
		return readyIs(k, false)() && containsAll(msg, []string{"Secret/" + ns + "/creds", "SOPS encrypted"}) && !strings.Contains(msg, "ENC[")
	}, "Ready=False naming the encrypted Secret")
	if exists(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns}}) {
		t.Fatal("the encrypted Secret was applied")
	}
}

// TestKustomizationWarnsOfUnusedImage checks that an images override that
// matches no image is a Warning Event naming it, not a failure, and that
// an override that is used gets no warning.
func TestKustomizationWarnsOfUnusedImageAndPatch(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	gitSource(t, ns, "img", parityFiles)
	startEngine(t, engine.Options{})
	k := kustomization(ns, "img", "img", "./app")
	k.Spec.TargetNamespace = ns
	k.Spec.Images = []kustomize.Image{{Name: "nginx", NewTag: "1.2"}, {Name: "absent", NewName: "registry.example/absent"}}
	// Patches see objects before the prefix: the first matches web by
	// its original name; the second selects nothing.
	k.Spec.NamePrefix = "p-"
	k.Spec.Patches = []kustomize.Patch{
		{Patch: `[{"op":"add","path":"/metadata/annotations","value":{"patched":"yes"}}]`, Target: &kustomize.Selector{Kind: "Deployment", Name: "web"}},
		{Patch: `[{"op":"add","path":"/metadata/annotations","value":{"patched":"yes"}}]`, Target: &kustomize.Selector{Kind: "Service", LabelSelector: "app=web"}},
	}
	if err := cp.Client.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	waitFor(t, k, readyIs(k, true), "Ready=True")
	var note string
	waitFor(t, k, func() bool {
		note = eventNote(t, ns, kustomizev1.KustomizationKind, "img", `spec.images[1] "absent"`)
		return note != ""
	}, "a Warning Event naming spec.images[1]")
	var list eventsv1.EventList
	if err := cp.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Reason == engine.UnusedImageReason && e.Type != corev1.EventTypeWarning {
			t.Errorf("%s event is %s, want Warning", e.Reason, e.Type)
		}
		if strings.Contains(e.Note, "spec.images[0]") {
			t.Errorf("the used override gets an event: %s", e.Note)
		}
	}
	if !strings.Contains(note, "Kustomization/"+ns+"/img") || !strings.Contains(note, "no effect") {
		t.Errorf("note = %q", note)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "p-web", Namespace: ns}}
	if !exists(t, dep) || dep.Annotations["patched"] != "yes" {
		t.Errorf("the patch by original name did not apply: %v", dep.Annotations)
	}
	waitFor(t, k, func() bool {
		note = eventNote(t, ns, kustomizev1.KustomizationKind, "img", `spec.patches[1] target {kind="Service", labelSelector="app=web"} matches no object`)
		return note != ""
	}, "a Warning Event naming spec.patches[1]")
	if n := eventNote(t, ns, kustomizev1.KustomizationKind, "img", "spec.patches[0]"); n != "" {
		t.Errorf("the patch that applied gets an event: %s", n)
	}
}
