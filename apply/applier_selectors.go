package apply

import (
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Flux's per-object apply annotations (or labels), honoured by every Apply
// with kustomize-controller's meanings; values match case-insensitively.
const (
	// SSAAnnotation set to SSAIfNotPresent creates the object when it is
	// absent and never writes it once it exists (so a tenant may edit it);
	// SSAIgnore never writes the object, whether set on the manifest or on
	// the live object; SSAMerge keeps the fields other managers set, which
	// Apply always does.
	SSAAnnotation = "kustomize.toolkit.fluxcd.io/ssa"
	// ForceAnnotation set to "Enabled" re-creates the object when an
	// update changes an immutable field, whatever the ImmutablePolicy.
	ForceAnnotation = "kustomize.toolkit.fluxcd.io/force"
	// ReconcileAnnotation set to "disabled" never writes the object, as
	// SSAIgnore.
	ReconcileAnnotation = "kustomize.toolkit.fluxcd.io/reconcile"
)

// Values of SSAAnnotation.
const (
	SSAIfNotPresent = "IfNotPresent"
	SSAIgnore       = "Ignore"
	SSAMerge        = "Merge"
)

// The selectors of ssa.ApplyOptions that kustomize-controller sets.
var (
	exclusionSelector    = map[string]string{SSAAnnotation: SSAIgnore, ReconcileAnnotation: "disabled"}
	ifNotPresentSelector = map[string]string{SSAAnnotation: SSAIfNotPresent}
	forceSelector        = map[string]string{ForceAnnotation: "Enabled"}
)

// selectorKeys are the label and annotation keys the Cache keeps of live
// objects, so that a live object's exclusion or force is known without a
// request.
var selectorKeys = []string{SSAAnnotation, ForceAnnotation, ReconcileAnnotation}

// skipReason returns why o, whose live metadata is live (nil when the
// object does not exist), must not be written, or "".
func skipReason(o *unstructured.Unstructured, live *unstructured.Unstructured) string {
	switch {
	case ssautils.AnyInMetadata(o, exclusionSelector):
		return "excluded by " + SSAAnnotation + ": " + SSAIgnore + " or " + ReconcileAnnotation + ": disabled"
	case live != nil && ssautils.AnyInMetadata(live, exclusionSelector):
		return "the live object is excluded by " + SSAAnnotation + ": " + SSAIgnore + " or " + ReconcileAnnotation + ": disabled"
	case live != nil && ssautils.AnyInMetadata(o, ifNotPresentSelector):
		return SSAAnnotation + ": " + SSAIfNotPresent + " and the object exists"
	}
	return ""
}

// liveMetadata returns an object that carries only the selector labels and
// annotations of a live object, for ssautils.AnyInMetadata.
func liveMetadata(labels, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	if l := selectorSubset(labels); l != nil {
		u.SetLabels(l)
	}
	if a := selectorSubset(annotations); a != nil {
		u.SetAnnotations(a)
	}
	return u
}

// selectorSubset keeps the selector keys of m; nil when there are none.
func selectorSubset(m map[string]string) map[string]string {
	var out map[string]string
	for _, k := range selectorKeys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}
