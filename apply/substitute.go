package apply

import (
	"context"
	"fmt"

	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/provider"
	"sigs.k8s.io/kustomize/api/resource"

	"github.com/cozystack/cozy-aio/health"
)

// SubstituteAnnotation opts an object out of post-build substitution when
// set, as a label or an annotation, to "disabled" (Flux's key).
const SubstituteAnnotation = "kustomize.toolkit.fluxcd.io/substitute"

// SubstituteOptions configures post-build substitution. The zero value
// substitutes nothing: like Flux's default strategy WithVariables, objects
// are left as they are when there are no variables.
type SubstituteOptions struct {
	// Vars maps variable names to values; newlines in values are dropped,
	// and a name that does not match ^[_[:alpha:]][_[:alpha:][:digit:]]*$
	// is an error, as in Flux. Default: none.
	Vars map[string]string
	// Strict makes a ${var} that has no value and no default an error
	// naming the object and the variable (kustomize-controller's
	// StrictPostBuildSubstitutions feature gate). Default: false, and such
	// a variable becomes the empty string.
	Strict bool
	// Always substitutes even when Vars is empty, so that defaults such as
	// ${var:=x} resolve (postBuild.substituteStrategy: Always). Default:
	// false.
	Always bool
}

// Substitute replaces post-build variables in every object with Flux's own
// code (fluxcd/pkg/kustomize over fluxcd/pkg/envsubst): ${var}, defaults
// (${var:=x}, ${var:-x}, ${var=x}, ${var-x}), case changes (${var^^}),
// substrings (${var:1:2}), pattern removal and replacement (${var/a/b}),
// lengths (${#var}), and the $${var} escape that yields a literal ${var}.
//
// Substitution works on the object's YAML, so a variable can stand for a
// number or a boolean. Objects labelled or annotated with
// SubstituteAnnotation: "disabled" are returned untouched. The input
// objects are not modified.
//
// Substitute starts from decoded objects, which no longer know how their
// strings were quoted in the source file; BuildOptions.Substitute
// substitutes while building, on the objects as kustomize renders them,
// exactly as kustomize-controller does.
func Substitute(objs []*unstructured.Unstructured, opts SubstituteOptions) ([]*unstructured.Unstructured, error) {
	rf := provider.NewDefaultDepProvider().GetResourceFactory()
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		res, err := rf.FromMap(o.DeepCopy().Object)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", health.RefOf(o), err)
		}
		if out[i], err = substituteResource(res, opts); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// substituteResource substitutes the variables of res in place and returns
// the result as an object.
func substituteResource(res *resource.Resource, opts SubstituteOptions) (*unstructured.Unstructured, error) {
	ref := resourceRef(res)
	vars := make(map[string]any, len(opts.Vars))
	for k, v := range opts.Vars {
		vars[k] = v
	}
	// Flux reads the variables of a Kustomization; dry-run mode takes
	// them from spec.postBuild.substitute only, without a client.
	ks := unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"postBuild": map[string]any{"substitute": vars}},
	}}
	_, err := fluxkustomize.SubstituteVariables(context.Background(), nil, ks, res,
		fluxkustomize.SubstituteWithDryRun(true),
		fluxkustomize.SubstituteWithStrict(opts.Strict),
		fluxkustomize.SubstituteWithAlways(opts.Always))
	if err != nil {
		return nil, &SubstituteError{Object: ref, Err: err}
	}
	m, err := res.Map()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func resourceRef(res *resource.Resource) health.ObjectRef {
	gvk := res.GetGvk()
	return health.ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: res.GetNamespace(), Name: res.GetName()}
}

// SubstituteError is a failed substitution in one object: an invalid
// variable name, a malformed ${...} expression, a variable without a value
// in strict mode, or a substituted object that is no longer valid YAML.
type SubstituteError struct {
	Object health.ObjectRef
	Err    error
}

func (e *SubstituteError) Error() string {
	return fmt.Sprintf("%s: post-build substitution: %v", e.Object, e.Err)
}

func (e *SubstituteError) Unwrap() error { return e.Err }
