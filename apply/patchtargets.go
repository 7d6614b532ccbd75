package apply

import (
	"context"
	"fmt"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/provider"
	"sigs.k8s.io/kustomize/api/resmap"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// UnmatchedPatchTargets returns, in order, the indexes of targets that
// select no object of the kustomization in dir as its patches see them.
// kustomize applies a patch whose target selects nothing to nothing and
// says nothing (so does Flux); callers warn.
//
// A kustomization's patches run after its resources, generators and
// components are gathered and before its own namespace, prefixes, labels
// and images are set, so the targets are matched, with kustomize's own
// selection (a name or namespace matches the original or the current
// one), against the build of dir with those transformers taken out. Nil
// targets (a patch that names its object in its body) are skipped:
// kustomize fails the build when such a patch matches nothing.
//
// opts are Build's; Decrypt and Substitute play no part.
func UnmatchedPatchTargets(ctx context.Context, dir string, opts BuildOptions, targets []*kusttypes.Selector) ([]int, error) {
	some := false
	for _, t := range targets {
		some = some || t != nil
	}
	if !some {
		return nil, nil
	}
	mem, at, err := load(ctx, dir, &opts)
	if err != nil {
		return nil, err
	}
	file := kustomizationFile(mem, at)
	data, err := mem.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var k kusttypes.Kustomization
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	// What runs after the patches, or is a patch itself.
	k.Patches, k.PatchesStrategicMerge, k.PatchesJson6902 = nil, nil, nil
	k.Namespace, k.NamePrefix, k.NameSuffix = "", "", ""
	k.Labels, k.CommonLabels, k.CommonAnnotations = nil, nil, nil
	k.Images, k.Replicas, k.Replacements = nil, nil, nil
	k.Transformers, k.Validators = nil, nil
	if data, err = yaml.Marshal(k); err != nil {
		return nil, err
	}
	if err := mem.WriteFile(file, data); err != nil {
		return nil, err
	}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, at)
	if err != nil {
		return nil, fmt.Errorf("kustomize build of %s without its transformers: %w", dir, err)
	}
	return unmatched(rm, targets)
}

// UnmatchedTargets returns, in order, the indexes of targets that select
// no object of the YAML stream rendered: a HelmRelease post-renderer's
// patches see the objects of the renderer before it. Nil targets are
// skipped.
func UnmatchedTargets(rendered []byte, targets []*kusttypes.Selector) ([]int, error) {
	rm, err := resmap.NewFactory(provider.NewDefaultDepProvider().GetResourceFactory()).NewResMapFromBytes(rendered)
	if err != nil {
		return nil, err
	}
	return unmatched(rm, targets)
}

func unmatched(rm resmap.ResMap, targets []*kusttypes.Selector) ([]int, error) {
	var out []int
	for i, t := range targets {
		if t == nil {
			continue
		}
		sel, err := rm.Select(*t)
		if err != nil {
			return nil, fmt.Errorf("target %d: %w", i, err)
		}
		if len(sel) == 0 {
			out = append(out, i)
		}
	}
	return out, nil
}
