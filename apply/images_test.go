package apply_test

import (
	"slices"
	"testing"

	"github.com/fluxcd/pkg/apis/kustomize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-aio/apply"
)

func TestUnusedImages(t *testing.T) {
	pod := func(images ...string) *unstructured.Unstructured {
		var cs []any
		for _, img := range images {
			cs = append(cs, map[string]any{"name": "c", "image": img})
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"initContainers": cs[:1], "containers": cs[1:]}}}}}
	}
	objs := []*unstructured.Unstructured{pod("registry:5000/init:1.0", "registry.example/nginx:1.2", "busybox@sha256:abc", "redis")}
	images := []kustomize.Image{
		{Name: "nginx", NewName: "registry.example/nginx", NewTag: "1.2"}, // applied: the new name is there
		{Name: "busybox", Digest: "sha256:abc"},                           // applied: same name
		{Name: "registry:5000/init", NewTag: "1.0"},                       // a registry port is not a tag
		{Name: "redis"},
		{Name: "absent", NewTag: "2"},
		{Name: "nginx-old", NewName: "elsewhere/nginx"},
		{Name: "registry"}, // a host is not an image name
	}
	if got, want := apply.UnusedImages(objs, images), []int{4, 5, 6}; !slices.Equal(got, want) {
		t.Errorf("UnusedImages = %v, want %v", got, want)
	}
	if got := apply.UnusedImages(objs, nil); got != nil {
		t.Errorf("no overrides: %v", got)
	}
}
