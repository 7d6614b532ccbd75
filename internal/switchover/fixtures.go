package switchover

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// units are the kinds whose objects carry their status in the fixtures;
// what else a fixture holds (release Secrets, applied objects) is written
// as the engine that made it left it.
var units = []schema.GroupVersionKind{
	{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "HelmChart"},
	{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"},
	{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"},
}

// applied are the kinds of the objects the workload's charts and
// Kustomizations apply.
var applied = []schema.GroupVersionKind{
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "ServiceAccount"},
	{Version: "v1", Kind: "Service"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
	{Group: "apps", Version: "v1", Kind: "Deployment"},
}

// Record writes, as a YAML stream, what the engine that ran left of the
// first releases HelmReleases and kustomizations Kustomizations: the
// release Secrets, the objects applied (with their managed fields), the
// HelmCharts generated, and the HelmReleases and Kustomizations with their
// status.
func Record(ctx context.Context, c client.Reader, w io.Writer, releases, kustomizations int) error {
	var hrs, kss []string
	for i := range min(releases, ReleasesPerNS) {
		hrs = append(hrs, fmt.Sprintf("app-%d", i))
	}
	for i := range kustomizations {
		kss = append(kss, fmt.Sprintf("app-%d", i))
	}
	return record(ctx, c, w, NamespaceOf(0), hrs, AppsNamespace, kss)
}

// record writes the HelmReleases hrs of namespace hrNS and the
// Kustomizations kss of ksNS, with what they left (Record).
func record(ctx context.Context, c client.Reader, w io.Writer, hrNS string, hrs []string, ksNS string, kss []string) error {
	var out []*unstructured.Unstructured
	list := func(gvk schema.GroupVersionKind, namespace string, keep func(u *unstructured.Unstructured) bool) error {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, l, client.InNamespace(namespace)); err != nil {
			return err
		}
		for i := range l.Items {
			if keep(&l.Items[i]) {
				out = append(out, &l.Items[i])
			}
		}
		return nil
	}
	in := func(names []string, key string) func(u *unstructured.Unstructured) bool {
		return func(u *unstructured.Unstructured) bool { return slices.Contains(names, u.GetLabels()[key]) }
	}
	if err := list(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, hrNS, func(u *unstructured.Unstructured) bool {
		return u.GetLabels()["owner"] == "helm" && slices.Contains(hrs, u.GetLabels()["name"])
	}); err != nil {
		return err
	}
	for _, gvk := range applied {
		if err := list(gvk, hrNS, in(hrs, "app.kubernetes.io/instance")); err != nil {
			return err
		}
		if len(kss) > 0 {
			if err := list(gvk, ksNS, in(kss, "kustomize.toolkit.fluxcd.io/name")); err != nil {
				return err
			}
		}
	}
	if err := list(units[0], hrNS, in(hrs, "helm.toolkit.fluxcd.io/name")); err != nil {
		return err
	}
	if err := list(units[1], hrNS, func(u *unstructured.Unstructured) bool { return slices.Contains(hrs, u.GetName()) }); err != nil {
		return err
	}
	if len(kss) > 0 {
		if err := list(units[2], ksNS, func(u *unstructured.Unstructured) bool { return slices.Contains(kss, u.GetName()) }); err != nil {
			return err
		}
	}
	for _, u := range out {
		clean(u)
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "---\n%s", b); err != nil {
			return err
		}
	}
	return nil
}

// clean drops what the API server assigns.
func clean(u *unstructured.Unstructured) {
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "selfLink"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	isUnit := slices.ContainsFunc(units, func(g schema.GroupVersionKind) bool { return g == u.GroupVersionKind() })
	if !isUnit {
		unstructured.RemoveNestedField(u.Object, "status")
	}
}

// Loaded is what Load created.
type Loaded struct {
	// Applied are the applied objects and the release Secrets.
	Applied []*unstructured.Unstructured
	// Units are the HelmCharts, HelmReleases and Kustomizations.
	Units []*unstructured.Unstructured
}

// Load creates a fixture's objects in a cluster with no engine running,
// as the recorded engine left them: release Secrets as they were, applied
// objects server-side applied by the field manager that applied them
// (their managed fields' Apply entry), the HelmCharts, HelmReleases and
// Kustomizations created, then their status written. Namespaces are
// created as needed.
func Load(ctx context.Context, c client.Client, r io.Reader) (Loaded, error) {
	var out Loaded
	dec := utilyaml.NewYAMLReader(bufio.NewReader(r))
	namespaces := map[string]bool{}
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return out, err
		}
		if u.Object == nil {
			continue
		}
		if ns := u.GetNamespace(); ns != "" && !namespaces[ns] {
			namespaces[ns] = true
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
				return out, err
			}
		}
		ref := fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
		switch {
		case slices.Contains(units, u.GroupVersionKind()):
			status := u.Object["status"]
			delete(u.Object, "status")
			if err := createAtGeneration(ctx, c, u, recordedGeneration(status)); err != nil {
				return out, fmt.Errorf("creating %s: %w", ref, err)
			}
			if status != nil {
				u.Object["status"] = status
				if err := c.Status().Update(ctx, u); err != nil {
					return out, fmt.Errorf("writing the status of %s: %w", ref, err)
				}
			}
			out.Units = append(out.Units, u)
		case u.GetKind() == "Secret":
			u.SetManagedFields(nil)
			if err := c.Create(ctx, u); err != nil {
				return out, fmt.Errorf("creating %s: %w", ref, err)
			}
			out.Applied = append(out.Applied, u)
		default:
			manager, cfg, err := appliedConfiguration(u)
			if err != nil {
				return out, fmt.Errorf("%s: %w", ref, err)
			}
			if err := c.Patch(ctx, cfg, client.Apply, client.FieldOwner(manager), client.ForceOwnership); err != nil {
				return out, fmt.Errorf("applying %s as %s: %w", ref, manager, err)
			}
			out.Applied = append(out.Applied, cfg)
		}
	}
	return out, nil
}

// recordedGeneration is the generation a recorded status observed: its
// observedGeneration or lastAttemptedGeneration, whichever is higher.
func recordedGeneration(status any) int64 {
	st, _ := status.(map[string]any)
	var g int64
	for _, f := range []string{"observedGeneration", "lastAttemptedGeneration"} {
		switch v := st[f].(type) { // YAML through JSON: float64
		case float64:
			g = max(g, int64(v))
		case int64:
			g = max(g, v)
		}
	}
	return g
}

// createAtGeneration creates u so that its generation is g (at least 1),
// as it was when its status was recorded: the engines compare the
// generation with what their status observed (a new generation resets
// helm-controller's failure counts). The spec is written g-1 times, each
// time with another interval, the last time as recorded.
func createAtGeneration(ctx context.Context, c client.Client, u *unstructured.Unstructured, g int64) error {
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	if g <= 1 || spec == nil {
		return c.Create(ctx, u)
	}
	for i := int64(1); i <= g; i++ {
		if i < g {
			if err := unstructured.SetNestedField(u.Object, fmt.Sprintf("%dh", 100+i), "spec", "interval"); err != nil {
				return err
			}
		} else {
			u.Object["spec"] = spec
		}
		var err error
		if i == 1 {
			err = c.Create(ctx, u)
		} else {
			err = c.Update(ctx, u)
		}
		if err != nil {
			return err
		}
	}
	if u.GetGeneration() != g {
		return fmt.Errorf("generation %d, want %d", u.GetGeneration(), g)
	}
	return nil
}

// Versions maps each object to its resourceVersion, by kind, namespace
// and name, as read now.
func Versions(ctx context.Context, c client.Reader, objs []*unstructured.Unstructured) (map[string]string, error) {
	out := map[string]string{}
	for _, o := range objs {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		out[strings.Join([]string{o.GetKind(), o.GetNamespace(), o.GetName()}, "/")] = live.GetResourceVersion()
	}
	return out, nil
}

// appliedConfiguration is what the field manager of u's Apply entry
// applied, extracted from u by client-go's typed Extract functions (the
// fields its managed fields name, server-set and defaulted fields left
// out), so that applying it as that manager gives every field the owner
// it had in the recorded run.
func appliedConfiguration(u *unstructured.Unstructured) (string, *unstructured.Unstructured, error) {
	manager := ""
	for _, e := range u.GetManagedFields() {
		if e.Operation == metav1.ManagedFieldsOperationApply {
			manager = e.Manager
			break
		}
	}
	if manager == "" {
		return "", nil, errors.New("no Apply entry in its managed fields")
	}
	from := func(typed any) error {
		return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed)
	}
	var cfg any
	var err error
	switch u.GroupVersionKind() {
	case schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}:
		o := &corev1.ConfigMap{}
		if err = from(o); err == nil {
			cfg, err = corev1ac.ExtractConfigMap(o, manager)
		}
	case schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}:
		o := &corev1.ServiceAccount{}
		if err = from(o); err == nil {
			cfg, err = corev1ac.ExtractServiceAccount(o, manager)
		}
	case schema.GroupVersionKind{Version: "v1", Kind: "Service"}:
		o := &corev1.Service{}
		if err = from(o); err == nil {
			cfg, err = corev1ac.ExtractService(o, manager)
		}
	case schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}:
		o := &rbacv1.Role{}
		if err = from(o); err == nil {
			cfg, err = rbacv1ac.ExtractRole(o, manager)
		}
	case schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}:
		o := &rbacv1.RoleBinding{}
		if err = from(o); err == nil {
			cfg, err = rbacv1ac.ExtractRoleBinding(o, manager)
		}
	case schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}:
		o := &appsv1.Deployment{}
		if err = from(o); err == nil {
			cfg, err = appsv1ac.ExtractDeployment(o, manager)
		}
	default:
		return "", nil, fmt.Errorf("kind %s is not in the workload", u.GroupVersionKind())
	}
	if err != nil {
		return "", nil, err
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", nil, err
	}
	out := &unstructured.Unstructured{}
	if err := json.Unmarshal(b, &out.Object); err != nil {
		return "", nil, err
	}
	var trie map[string]any
	for _, e := range u.GetManagedFields() {
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.FieldsV1 != nil {
			if err := json.Unmarshal(e.FieldsV1.Raw, &trie); err != nil {
				return "", nil, err
			}
		}
	}
	emptyStructs(out.Object, u.Object, trie)
	return manager, out, nil
}

// emptyStructs puts back the empty objects the manager applied (a
// Deployment's strategy: {}, which the server then defaults) that the
// typed extraction leaves out: a field its managed fields name with
// nothing under it, whose live value is an object, absent from cfg.
func emptyStructs(cfg, live map[string]any, trie map[string]any) {
	for k, sub := range trie {
		name, ok := strings.CutPrefix(k, "f:")
		if !ok {
			continue
		}
		lv, isMap := live[name].(map[string]any)
		if !isMap {
			continue
		}
		subTrie, _ := sub.(map[string]any)
		cv, present := cfg[name]
		switch {
		case len(subTrie) == 0 && !present:
			cfg[name] = map[string]any{}
		case present:
			if cm, ok := cv.(map[string]any); ok {
				emptyStructs(cm, lv, subTrie)
			}
		}
	}
}
