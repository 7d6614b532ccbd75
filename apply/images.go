package apply

import (
	"strings"

	"github.com/fluxcd/pkg/apis/kustomize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// UnusedImages returns, in order, the indexes of the image overrides
// (kustomize's images, as a Kustomization's spec.images or a HelmRelease
// post-renderer's images give them) that match no image of objs, the
// objects rendered with the overrides applied: an override matches when an
// image's name (its reference without tag and digest) equals the
// override's name, or its newName once applied. kustomize leaves such an
// override without effect and says nothing; callers warn.
//
// Every string field named "image" counts, wherever it is, so an override
// that kustomize applied is never reported; one that only matches an
// image field kustomize does not rewrite is not reported either.
func UnusedImages(objs []*unstructured.Unstructured, images []kustomize.Image) []int {
	if len(images) == 0 {
		return nil
	}
	names := map[string]bool{}
	for _, o := range objs {
		collectImages(o.Object, names)
	}
	var out []int
	for i, img := range images {
		if !names[img.Name] && (img.NewName == "" || !names[img.NewName]) {
			out = append(out, i)
		}
	}
	return out
}

func collectImages(v any, names map[string]bool) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if s, ok := x.(string); ok && k == "image" {
				names[imageName(s)] = true
				continue
			}
			collectImages(x, names)
		}
	case []any:
		for _, x := range t {
			collectImages(x, names)
		}
	}
}

// imageName is ref without its @digest and :tag (a colon before the last
// slash is a registry port).
func imageName(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}
