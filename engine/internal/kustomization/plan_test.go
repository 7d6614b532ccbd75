package kustomization

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A built object may hold Go ints (kustomize's output): the plan's copy
// takes them (DeepCopy panics on them) as the int64s the server returns.
func TestJSONCopyTakesGoInts(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "a", "namespace": "ns"},
		"spec":     map[string]any{"replicas": 2, "ports": []any{map[string]any{"port": 80}}},
	}}
	c, err := jsonCopy(u)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := c.Object["spec"].(map[string]any)["replicas"].(int64); !ok || r != 2 {
		t.Fatalf("replicas %#v, want int64 2", c.Object["spec"].(map[string]any)["replicas"])
	}
	_ = c.DeepCopy() // would panic on an int
	if _, err := desiredDigest([]*unstructured.Unstructured{u}, "rev"); err != nil {
		t.Fatal(err)
	}
}
