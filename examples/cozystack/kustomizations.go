package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/cozystack/cozy-aio/internal/testenv"
)

var ksGVR = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}

// appsNamespace holds the Kustomizations of -kustomizations and what
// they apply.
const appsNamespace = "acceptance-apps"

// appFiles are the manifests of n applications, one directory each, of
// the kinds a platform's Kustomizations apply: ConfigMaps, a
// ServiceAccount, a Role and its RoleBinding, a Service and a Deployment.
func appFiles(n int) map[string]string {
	files := map[string]string{}
	for i := range n {
		app := fmt.Sprintf("app-%d", i)
		var b strings.Builder
		for j := range 3 {
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s-config-%d, namespace: %s}\ndata: {index: %q, app: %s}\n", app, j, appsNamespace, fmt.Sprint(j), app)
		}
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: %s, namespace: %s}\n", app, appsNamespace)
		fmt.Fprintf(&b, "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: %s, namespace: %s}\nrules: [{apiGroups: [\"\"], resources: [configmaps], verbs: [get, list, watch]}]\n", app, appsNamespace)
		fmt.Fprintf(&b, "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: %s, namespace: %s}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: %s}\nsubjects: [{kind: ServiceAccount, name: %s, namespace: %s}]\n", app, appsNamespace, app, app, appsNamespace)
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: %s}\nspec: {selector: {app: %s}, ports: [{port: 80, targetPort: 8080}]}\n", app, appsNamespace, app)
		fmt.Fprintf(&b, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: %s, namespace: %s}\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: %s}}\n  template:\n    metadata: {labels: {app: %s}}\n    spec:\n      serviceAccountName: %s\n      containers: [{name: app, image: registry.example.org/%s:1.0.0, ports: [{containerPort: 8080}]}]\n", app, appsNamespace, app, app, app, app)
		files[app+"/manifests.yaml"] = b.String()
	}
	return files
}

// createKustomizations pushes n applications as an OCI artifact and
// creates an OCIRepository for it and n Kustomizations with prune, one per
// application.
func createKustomizations(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, reg *testenv.Registry, n int) error {
	desc, err := reg.PushArtifact(ctx, "acceptance-apps", "v1", appFiles(n), nil)
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appsNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	repo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository",
		"metadata": map[string]any{"name": "acceptance-apps", "namespace": appsNamespace},
		"spec": map[string]any{
			"url": "oci://" + reg.Host() + "/acceptance-apps", "interval": "10m",
			"ref": map[string]any{"digest": desc.Digest.String()},
		},
	}}
	if _, err := dyn.Resource(ociGVR).Namespace(appsNamespace).Create(ctx, repo, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the OCIRepository acceptance-apps: %w", err)
	}
	for i := range n {
		ks := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
			"metadata": map[string]any{"name": fmt.Sprintf("app-%d", i), "namespace": appsNamespace},
			"spec": map[string]any{
				"interval": "10m", "prune": true, "path": fmt.Sprintf("./app-%d", i), "timeout": "2m",
				"sourceRef": map[string]any{"kind": "OCIRepository", "name": "acceptance-apps"},
			},
		}}
		if _, err := dyn.Resource(ksGVR).Namespace(appsNamespace).Create(ctx, ks, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Kustomization app-%d: %w", i, err)
		}
	}
	return nil
}

// waitKustomizations waits until every Kustomization is Ready.
func waitKustomizations(ctx context.Context, dyn dynamic.Interface, timeout time.Duration, say func(string, ...any)) error {
	var notReady []string
	err := waitFor(ctx, timeout, "every Kustomization Ready", func() (bool, error) {
		list, err := dyn.Resource(ksGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		notReady = notReady[:0]
		for _, ks := range list.Items {
			if s, _ := readyOf(&ks); s != "True" {
				notReady = append(notReady, ks.GetNamespace()+"/"+ks.GetName())
			}
		}
		return len(notReady) == 0, nil
	})
	if err != nil {
		say("Kustomizations not Ready: %s", strings.Join(notReady, ", "))
	}
	return err
}
