package bootstrap_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/bootstrap"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestStaticPodGolden(t *testing.T) {
	got, err := bootstrap.RenderStaticPod(bootstrap.StaticPodOptions{Image: "ghcr.io/cozystack/cozy-aio:v0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "static-pod.golden.yaml")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("static pod differs from %s (run with -update after checking):\n%s", golden, got)
	}
}

func TestStaticPodAcceptedByAPIServer(t *testing.T) {
	ctx := testContext(t)
	b, err := bootstrap.RenderStaticPod(bootstrap.StaticPodOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(b, &pod); err != nil {
		t.Fatalf("the rendered manifest does not decode strictly as a Pod: %v", err)
	}
	if err := cp.Client.Create(ctx, &pod, client.DryRunAll); err != nil {
		t.Fatalf("server-side dry-run create: %v", err)
	}
	if !pod.Spec.HostNetwork || pod.Spec.PriorityClassName != "system-node-critical" {
		t.Fatalf("hostNetwork/priority lost: %+v", pod.Spec)
	}
	if pod.Spec.Priority == nil || *pod.Spec.Priority < 2000000000 {
		t.Fatalf("the API server did not resolve system-node-critical priority: %v", pod.Spec.Priority)
	}
	tolerated := map[string]bool{}
	for _, tl := range pod.Spec.Tolerations {
		tolerated[tl.Key] = true
	}
	for _, k := range bootstrap.NotReadyTolerations {
		if !tolerated[k] {
			t.Errorf("missing toleration %s", k)
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, v := range pod.Spec.Containers[0].Env {
		env[v.Name] = v
	}
	if env["GOMEMLIMIT"].Value != "966367641" {
		t.Errorf("GOMEMLIMIT should be 90%% of 1Gi: %+v", env)
	}
	// The same manifest on every control-plane node: each replica takes
	// its identity from its node, and its Leases' namespace from its pod.
	if f := env["NODE_NAME"].ValueFrom; f == nil || f.FieldRef == nil || f.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("NODE_NAME should come from spec.nodeName: %+v", env["NODE_NAME"])
	}
	if f := env["POD_NAMESPACE"].ValueFrom; f == nil || f.FieldRef == nil || f.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("POD_NAMESPACE should come from metadata.namespace: %+v", env["POD_NAMESPACE"])
	}
}

func TestStaticPodRejectsBadQuantity(t *testing.T) {
	if _, err := bootstrap.StaticPod(bootstrap.StaticPodOptions{MemoryLimit: "lots"}); err == nil {
		t.Fatal("want an error for a bad memory limit")
	}
}
