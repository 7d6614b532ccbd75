package frame

import (
	"strconv"
	"strings"

	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/resid"
)

// KustomizeSelector converts a Flux patch target to kustomize's selector:
// a Kustomization's patches and a HelmRelease's kustomize post-renderer
// select alike.

func KustomizeSelector(s *kustomize.Selector) *kusttypes.Selector {
	if s == nil {
		return nil
	}
	return &kusttypes.Selector{
		ResId: resid.ResId{
			Gvk:       resid.Gvk{Group: s.Group, Version: s.Version, Kind: s.Kind},
			Name:      s.Name,
			Namespace: s.Namespace,
		},
		AnnotationSelector: s.AnnotationSelector,
		LabelSelector:      s.LabelSelector,
	}
}

// UnusedImageReason is the reason of the Warning Event about an image
// override (a Kustomization's spec.images) that matches no image of the
// rendered objects.
const UnusedImageReason = "UnusedImageOverride"

// UnmatchedPatchReason is the reason of the Warning Event about a patch
// (a Kustomization's spec.patches, a HelmRelease post-renderer's patches)
// whose target selects no object.
const UnmatchedPatchReason = "UnmatchedPatchTarget"

// IgnoreRule is one rule of spec.ignore or spec.driftDetection.ignore.
func IgnoreRule(paths []string, t *kustomize.Selector) jsondiff.IgnoreRule {
	rule := jsondiff.IgnoreRule{Paths: paths}
	if t != nil {
		rule.Selector = &jsondiff.Selector{Group: t.Group, Version: t.Version, Kind: t.Kind, Name: t.Name,
			Namespace: t.Namespace, AnnotationSelector: t.AnnotationSelector, LabelSelector: t.LabelSelector}
	}
	return rule
}

// DescribeSelector writes a patch target as a user wrote it.
func DescribeSelector(s *kustomize.Selector) string {
	var parts []string
	for _, kv := range [][2]string{{"group", s.Group}, {"version", s.Version}, {"kind", s.Kind}, {"name", s.Name},
		{"namespace", s.Namespace}, {"labelSelector", s.LabelSelector}, {"annotationSelector", s.AnnotationSelector}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+strconv.Quote(kv[1]))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
