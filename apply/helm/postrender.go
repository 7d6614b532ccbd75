package helm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"sigs.k8s.io/kustomize/api/builtins"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/provider"
	"sigs.k8s.io/kustomize/api/resmap"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// PostRender changes the manifests Helm renders before they are applied,
// in helm-controller's order: each Kustomize overlay, then the common
// labels and annotations, then the origin labels. The zero value changes
// nothing.
type PostRender struct {
	// Kustomize overlays are applied in order (spec.postRenderers).
	Kustomize []KustomizeOverlay `json:"kustomize,omitempty"`
	// Labels and Annotations are set on every object's metadata
	// (spec.commonMetadata).
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// OriginLabels are set on every object's metadata last, winning over
	// Labels (helm-controller's helm.toolkit.fluxcd.io/name and
	// /namespace). They name the release's owner, so they are not part of
	// the release's digest.
	OriginLabels map[string]string `json:"-"`
	// Rendered, when set, is called with each kustomize overlay's index,
	// its input and its output, for checks that change neither (the
	// engine warns of patch targets and image overrides that match
	// nothing). Not part of the digest.
	Rendered func(overlay int, in, out []byte) `json:"-"`
}

// KustomizeOverlay is one kustomize post-renderer: patches (strategic
// merge or JSON 6902, with target selectors) and image overrides.
type KustomizeOverlay struct {
	Patches []kusttypes.Patch `json:"patches,omitempty"`
	Images  []kusttypes.Image `json:"images,omitempty"`
}

func (p PostRender) isZero() bool {
	return len(p.Kustomize) == 0 && len(p.Labels) == 0 && len(p.Annotations) == 0 && len(p.OriginLabels) == 0
}

// digestPart is what of p changes the release: empty when nothing does,
// so that releases without post-renderers keep their digest.
func (p PostRender) digestPart() string {
	if len(p.Kustomize) == 0 && len(p.Labels) == 0 && len(p.Annotations) == 0 {
		return ""
	}
	b, _ := json.Marshal(p)
	return string(b)
}

// Run implements Helm's postrenderer.PostRenderer.
func (p PostRender) Run(rendered *bytes.Buffer) (*bytes.Buffer, error) {
	out := rendered
	for i, k := range p.Kustomize {
		in := out
		var err error
		if out, err = k.run(in); err != nil {
			return nil, fmt.Errorf("post-renderer %d (kustomize): %w", i, err)
		}
		if p.Rendered != nil {
			p.Rendered(i, in.Bytes(), out.Bytes())
		}
	}
	var transformers []resmap.Transformer
	if len(p.Labels) > 0 {
		transformers = append(transformers, metadataLabels(p.Labels))
	}
	if len(p.Annotations) > 0 {
		transformers = append(transformers, &builtins.AnnotationsTransformerPlugin{
			Annotations: p.Annotations,
			FieldSpecs:  []kusttypes.FieldSpec{{Path: "metadata/annotations", CreateIfNotPresent: true}},
		})
	}
	if len(p.OriginLabels) > 0 {
		transformers = append(transformers, metadataLabels(p.OriginLabels))
	}
	if len(transformers) == 0 {
		return out, nil
	}
	rm, err := resmap.NewFactory(provider.NewDefaultDepProvider().GetResourceFactory()).NewResMapFromBytes(out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("post-renderer (metadata): %w", err)
	}
	for _, t := range transformers {
		if err := t.Transform(rm); err != nil {
			return nil, fmt.Errorf("post-renderer (metadata): %w", err)
		}
	}
	y, err := rm.AsYaml()
	if err != nil {
		return nil, err
	}
	return bytes.NewBuffer(y), nil
}

// metadataLabels sets labels on metadata only, never on selectors or
// templates, as helm-controller does.
func metadataLabels(labels map[string]string) resmap.Transformer {
	return &builtins.LabelTransformerPlugin{
		Labels:     labels,
		FieldSpecs: []kusttypes.FieldSpec{{Path: "metadata/labels", CreateIfNotPresent: true}},
	}
}

// krustyMu serialises kustomize runs: krusty has shared global state
// (kubernetes-sigs/kustomize#3659).
var krustyMu sync.Mutex

func (k KustomizeOverlay) run(rendered *bytes.Buffer) (*bytes.Buffer, error) {
	fs := filesys.MakeFsInMemory()
	const input = "helm-output.yaml"
	if err := fs.WriteFile(input, rendered.Bytes()); err != nil {
		return nil, err
	}
	kust := kusttypes.Kustomization{
		TypeMeta:  kusttypes.TypeMeta{APIVersion: kusttypes.KustomizationVersion, Kind: kusttypes.KustomizationKind},
		Resources: []string{input},
		Patches:   k.Patches,
		Images:    k.Images,
	}
	b, err := json.Marshal(kust)
	if err != nil {
		return nil, err
	}
	if err := fs.WriteFile("kustomization.yaml", b); err != nil {
		return nil, err
	}
	krustyMu.Lock()
	defer krustyMu.Unlock()
	rm, err := krusty.MakeKustomizer(&krusty.Options{
		LoadRestrictions: kusttypes.LoadRestrictionsRootOnly,
		PluginConfig:     kusttypes.DisabledPluginConfig(),
	}).Run(fs, ".")
	if err != nil {
		return nil, err
	}
	y, err := rm.AsYaml()
	if err != nil {
		return nil, err
	}
	return bytes.NewBuffer(y), nil
}
