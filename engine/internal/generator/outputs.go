package generator

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/generate"
)

// sourceWatcherName is the controller name source-watcher writes in the
// app.kubernetes.io/managed-by label of the ExternalArtifacts it
// generates; cozy-aio writes the same, so that a switch between them
// changes no label.
const sourceWatcherName = "source-watcher"

// maxInputsSize bounds the file an output's inputsFrom reads, as
// source-watcher bounds it (1 MiB).
const maxInputsSize = 1 << 20

// generatedOutput is one output of a generator, with its pathPattern
// captures rendered into it: its namespace resolved and the captures it
// carries as labels.
type generatedOutput struct {
	swv1beta1.OutputArtifact
	namespace string
	labels    map[string]string // the captures, lower-cased
	raw       map[string]string // the captures as found
}

// generatorOutputs lists the outputs of gen: its artifacts as written, or
// with spec.pathPattern each artifact once per matching directory of the
// pattern's source, its placeholders rendered (names and namespaces from
// the lower-cased captures, paths from the captures as found). An error
// wraps generate.ErrPathPattern or names a duplicate: the spec or the
// source must change.
func generatorOutputs(gen *swv1beta1.ArtifactGenerator, sources map[string]generate.Source) ([]generatedOutput, error) {
	var outs []generatedOutput
	if gen.Spec.PathPattern == "" {
		for _, o := range gen.Spec.OutputArtifacts {
			outs = append(outs, generatedOutput{OutputArtifact: o, namespace: gen.GetArtifactNamespace(&o)})
		}
		return outs, uniqueOutputs(outs)
	}
	alias, pattern, ok := strings.Cut(strings.TrimPrefix(gen.Spec.PathPattern, "@"), "/")
	if !ok || !strings.HasPrefix(gen.Spec.PathPattern, "@") {
		return nil, fmt.Errorf("%w: %q is not @<alias>/<pattern>", generate.ErrPathPattern, gen.Spec.PathPattern)
	}
	src, ok := sources[alias]
	if !ok || src.FS == nil {
		return nil, fmt.Errorf("%w: %q: no source has the alias %q", generate.ErrPathPattern, gen.Spec.PathPattern, alias)
	}
	matches, err := generate.Expand(src.FS, pattern)
	if err != nil {
		return nil, err
	}
	for _, m := range matches {
		for _, o := range gen.Spec.OutputArtifacts {
			r, err := renderOutput(gen, o, m)
			if err != nil {
				return nil, fmt.Errorf("pathPattern %q, directory %s: %w", gen.Spec.PathPattern, m.Dir, err)
			}
			outs = append(outs, r)
		}
	}
	return outs, uniqueOutputs(outs)
}

// renderOutput renders one artifact of a generator for one match of its
// pathPattern.
func renderOutput(gen *swv1beta1.ArtifactGenerator, o swv1beta1.OutputArtifact, m generate.Match) (generatedOutput, error) {
	var err error
	r := generatedOutput{OutputArtifact: o, labels: m.Normalized, raw: m.Raw}
	render := func(dst *string, vars map[string]string) {
		if err == nil {
			*dst, err = generate.Render(*dst, vars)
		}
	}
	render(&r.Name, m.Normalized)
	render(&r.Namespace, m.Normalized)
	render(&r.InputsFrom, m.Raw)
	r.Copy = make([]swv1beta1.CopyOperation, len(o.Copy))
	for i, c := range o.Copy {
		render(&c.From, m.Raw)
		render(&c.To, m.Raw)
		r.Copy[i] = c
	}
	if err != nil {
		return r, err
	}
	if errs := validation.IsDNS1123Subdomain(r.Name); len(errs) > 0 {
		return r, fmt.Errorf("%w: the artifact name %q is not a valid object name: %s", generate.ErrPathPattern, r.Name, strings.Join(errs, "; "))
	}
	r.namespace = gen.GetArtifactNamespace(&r.OutputArtifact)
	if errs := validation.IsDNS1123Label(r.namespace); len(errs) > 0 {
		return r, fmt.Errorf("%w: the artifact namespace %q is not a valid namespace: %s", generate.ErrPathPattern, r.namespace, strings.Join(errs, "; "))
	}
	return r, nil
}

// uniqueOutputs refuses two outputs of one namespace and name.
func uniqueOutputs(outs []generatedOutput) error {
	seen := map[string]bool{}
	for _, o := range outs {
		k := o.namespace + "/" + o.Name
		if seen[k] {
			return fmt.Errorf("%w: two artifacts resolve to the ExternalArtifact %s", generate.ErrPathPattern, k)
		}
		seen[k] = true
	}
	return nil
}

// externalArtifactVerbs are what a generator's ServiceAccount must be
// allowed on ExternalArtifacts in each namespace its outputs go to.
var externalArtifactVerbs = []string{"create", "update", "delete"}

// authorize checks, as source-watcher does, that the ServiceAccount
// answering for the generator's outputs may create, update and delete
// ExternalArtifacts in each of their namespaces: spec.serviceAccountName
// for every namespace, else in restricted mode the default account for
// the namespaces other than the generator's. Without one the engine's own
// identity answers.
func (r *Reconciler) authorize(ctx context.Context, gen *swv1beta1.ArtifactGenerator, outs []generatedOutput) error {
	checked := map[string]bool{}
	for _, o := range outs {
		ns := o.namespace
		if checked[ns] {
			continue
		}
		checked[ns] = true
		sa := gen.Spec.ServiceAccountName
		if sa == "" && ns != gen.Namespace && r.opts.Restricted {
			sa = r.opts.DefaultServiceAccount
		}
		if sa == "" {
			continue
		}
		attrs := authorizationv1.ResourceAttributes{Namespace: ns, Group: sourcev1.GroupVersion.Group, Resource: "externalartifacts"}
		if err := r.accessReview(ctx, gen.Namespace, sa, attrs, externalArtifactVerbs); err != nil {
			return err
		}
	}
	return nil
}

// exportedInputs reads the YAML file an output's inputsFrom names,
// "@<alias>/<path>" in a source or "@artifact/<path>" in the generated
// artifact, into the ExternalArtifact's status.exportedInputs: each
// top-level key a JSON value. Empty when inputsFrom is.
func (r *Reconciler) exportedInputs(ctx context.Context, sources map[string]generate.Source, art source.Artifact, from string) (map[string]*apiextensionsv1.JSON, error) {
	if from == "" {
		return nil, nil
	}
	data, err := r.readGeneratorFile(ctx, sources, art, from)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parsing YAML: %w", err)
	}
	if len(doc) == 0 {
		return nil, nil
	}
	inputs := make(map[string]*apiextensionsv1.JSON, len(doc))
	for k, v := range doc {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", k, err)
		}
		inputs[k] = &apiextensionsv1.JSON{Raw: raw}
	}
	return inputs, nil
}
