package plan

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	statefulSet = schema.GroupKind{Group: "apps", Kind: "StatefulSet"}
	pvc         = schema.GroupKind{Kind: "PersistentVolumeClaim"}
	crd         = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
	service     = schema.GroupKind{Kind: "Service"}
)

// workloads are the kinds whose pods a selector picks from a template.
var workloads = []schema.GroupKind{
	{Group: "apps", Kind: "Deployment"}, statefulSet, {Group: "apps", Kind: "DaemonSet"}, {Group: "apps", Kind: "ReplicaSet"},
}

// dataKinds are the kinds whose deletion loses data.
var dataKinds = []schema.GroupKind{pvc, {Kind: "PersistentVolume"}, {Kind: "Namespace"}, crd}

// statefulSetMutable are the fields of a StatefulSet's spec the API server
// lets an update change; any other is refused.
var statefulSetMutable = []string{"replicas", "template", "ordinals", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
	"minReadySeconds", "revisionHistoryLimit"}

// immutable are the per-kind rules of fields an update cannot change: each
// returns the paths desired sets otherwise than live.
var immutable = map[schema.GroupKind]func(live, desired *unstructured.Unstructured) []string{
	statefulSet: func(live, desired *unstructured.Unstructured) []string {
		var out []string
		spec, _ := field(desired, "spec").(map[string]any)
		for k, v := range spec {
			if !slices.Contains(statefulSetMutable, k) && !subset(field(live, "spec", k), v) {
				out = append(out, "spec."+k)
			}
		}
		slices.Sort(out)
		return out
	},
	{Group: "apps", Kind: "Deployment"}: selectorOnly,
	{Group: "apps", Kind: "DaemonSet"}:  selectorOnly,
	{Group: "apps", Kind: "ReplicaSet"}: selectorOnly,
	{Group: "batch", Kind: "Job"}: func(live, desired *unstructured.Unstructured) []string {
		out := selectorOnly(live, desired)
		if t := field(desired, "spec", "template"); t != nil && !subset(field(live, "spec", "template"), t) {
			out = append(out, "spec.template")
		}
		return out
	},
	pvc: func(live, desired *unstructured.Unstructured) []string {
		var out []string
		spec, _ := field(desired, "spec").(map[string]any)
		for k, v := range spec {
			if k == "resources" {
				// Only the requested size may grow.
				v = withoutStorageRequest(v)
			}
			if !subset(field(live, "spec", k), v) {
				out = append(out, "spec."+k)
			}
		}
		slices.Sort(out)
		return out
	},
	service: func(live, desired *unstructured.Unstructured) []string {
		ip, _ := field(desired, "spec", "clusterIP").(string)
		have, _ := field(live, "spec", "clusterIP").(string)
		if ip != "" && have != "" && ip != have {
			return []string{"spec.clusterIP"}
		}
		return nil
	},
}

func selectorOnly(live, desired *unstructured.Unstructured) []string {
	if s := field(desired, "spec", "selector"); s != nil && !subset(field(live, "spec", "selector"), s) {
		return []string{"spec.selector"}
	}
	return nil
}

func withoutStorageRequest(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := runtime.DeepCopyJSONValue(m).(map[string]any)
	if req, ok := out["requests"].(map[string]any); ok {
		delete(req, "storage")
	}
	return out
}

// risks finds the risks of plan p of in.
func risks(in Input, p *Plan, current, desired map[Ref]*unstructured.Unstructured, live func(Ref) *unstructured.Unstructured) []Risk {
	var out []Risk
	add := func(code Code, r Ref, format string, args ...any) {
		out = append(out, Risk{Code: code, Object: r, Message: fmt.Sprintf(format, args...)})
	}
	for _, o := range p.Objects {
		switch o.Action {
		case Update:
			d, l := desired[o.Ref], live(o.Ref)
			if rule, ok := immutable[o.Ref.GroupKind()]; ok {
				if paths := rule(l, d); len(paths) > 0 {
					msg := "%s changes %s, which the API server will not update"
					if pol := policy(in, d); pol != "" {
						msg += "; the immutable-field policy " + pol + " applies"
					}
					add(ImmutableChange, o.Ref, msg, o.Ref, strings.Join(paths, ", "))
				}
			}
			if o.Ref.GroupKind() == crd {
				for _, v := range removedVersions(in, l, d) {
					add(CRDVersionRemoval, o.Ref, "%s drops version %s, in which objects are stored", o.Ref, v)
				}
			}
			if keep(current[o.Ref]) && !keep(d) {
				add(DataLoss, o.Ref, "%s loses helm.sh/resource-policy: keep: a later removal deletes it", o.Ref)
			}
		case Delete:
			if slices.Contains(dataKinds, o.Ref.GroupKind()) {
				add(DataLoss, o.Ref, "%s is deleted, and what it holds with it", o.Ref)
			} else if keep(current[o.Ref]) {
				add(DataLoss, o.Ref, "%s is deleted although the current state marks it helm.sh/resource-policy: keep", o.Ref)
			}
		}
		if o.Action == Update || o.Action == Unchanged {
			if who := otherOwner(in.Owner, live(o.Ref), current[o.Ref] != nil); who != "" {
				add(OwnershipChange, o.Ref, "%s belongs to %s: the new state takes it over", o.Ref, who)
			}
		}
	}
	out = append(out, duplicates(p, current, desired, live)...)
	for _, h := range in.Hooks {
		a := h.GetAnnotations()
		add(Hooks, RefOf(h), "%s runs on %s (delete policy: %s)", RefOf(h), a["helm.sh/hook"], orNone(a["helm.sh/hook-delete-policy"]))
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func policy(in Input, d *unstructured.Unstructured) string {
	if in.ImmutablePolicy == nil {
		return ""
	}
	return in.ImmutablePolicy(d)
}

func keep(u *unstructured.Unstructured) bool {
	return u != nil && u.GetAnnotations()["helm.sh/resource-policy"] == "keep"
}

// otherOwner names who else owns live, "" when nobody else does. An object
// the current state holds is the owner's already.
func otherOwner(o Owner, live *unstructured.Unstructured, held bool) string {
	if live == nil || held {
		return ""
	}
	a, l := live.GetAnnotations(), live.GetLabels()
	if o.Release != "" {
		if name := a["meta.helm.sh/release-name"]; name != "" {
			if rel := a["meta.helm.sh/release-namespace"] + "/" + name; rel != o.Release {
				return "the Helm release " + rel
			}
		}
	}
	if o.Inventory != "" {
		if name := l["kustomize.toolkit.fluxcd.io/name"]; name != "" {
			if ks := l["kustomize.toolkit.fluxcd.io/namespace"] + "/" + name; ks != o.Inventory {
				return "the Kustomization " + ks
			}
		}
	}
	if o.FieldManager != "" {
		for _, mf := range live.GetManagedFields() {
			if mf.Operation == metav1.ManagedFieldsOperationApply && mf.Manager != o.FieldManager {
				return "the field manager " + mf.Manager
			}
		}
	}
	return ""
}

// removedVersions returns the versions of live's CRD that objects are
// stored in (status.storedVersions, or StoredObjects for a version it
// serves) and that desired no longer serves.
func removedVersions(in Input, live, desired *unstructured.Unstructured) []string {
	serves := func(u *unstructured.Unstructured) map[string]bool {
		out := map[string]bool{}
		vs, _ := field(u, "spec", "versions").([]any)
		for _, v := range vs {
			m, _ := v.(map[string]any)
			name, _ := m["name"].(string)
			served, _ := m["served"].(bool)
			out[name] = served
		}
		return out
	}
	was, will := serves(live), serves(desired)
	stored, _ := field(live, "status", "storedVersions").([]any)
	var out []string
	for name, served := range was {
		if !served || will[name] {
			continue
		}
		inStored := slices.ContainsFunc(stored, func(s any) bool { return s == name })
		group, _ := field(live, "spec", "group").(string)
		plural, _ := field(live, "spec", "names", "plural").(string)
		if inStored || in.StoredObjects != nil && in.StoredObjects(group, name, plural) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// workload is a workload of a plan: its selector and pod labels.
type workload struct {
	ref      Ref
	u        *unstructured.Unstructured
	selector labels.Selector
	pods     labels.Set
}

func workloadOf(r Ref, u *unstructured.Unstructured) (workload, bool) {
	if u == nil || !slices.Contains(workloads, r.GroupKind()) {
		return workload{}, false
	}
	w := workload{ref: r, u: u, selector: labels.Nothing()}
	if m, ok := field(u, "spec", "selector").(map[string]any); ok {
		var ls metav1.LabelSelector
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &ls) == nil {
			if s, err := metav1.LabelSelectorAsSelector(&ls); err == nil {
				w.selector = s
			}
		}
	}
	if m, ok := field(u, "spec", "template", "metadata", "labels").(map[string]any); ok {
		w.pods = labels.Set{}
		for k, v := range m {
			w.pods[k], _ = v.(string)
		}
	}
	return w, true
}

// duplicates finds workloads created beside another of their kind whose
// selector picks their pods (deleted by the plan or staying), and Services
// that select the pods of both.
func duplicates(p *Plan, current, desired map[Ref]*unstructured.Unstructured, live func(Ref) *unstructured.Unstructured) []Risk {
	var created, old []workload
	for _, o := range p.Objects {
		switch o.Action {
		case Create:
			if w, ok := workloadOf(o.Ref, desired[o.Ref]); ok {
				created = append(created, w)
			}
		case Delete, Orphan:
			u := live(o.Ref)
			if u == nil {
				u = current[o.Ref]
			}
			if w, ok := workloadOf(o.Ref, u); ok {
				old = append(old, w)
			}
		}
	}
	var out []Risk
	for _, n := range created {
		for _, o := range old {
			if n.ref.GroupKind() != o.ref.GroupKind() || n.ref.Namespace != o.ref.Namespace || n.pods == nil || !o.selector.Matches(n.pods) {
				continue
			}
			msg := fmt.Sprintf("%s is created while %s goes, and %s's selector picks its pods: both run side by side", n.ref, o.ref.Name, o.ref.Name)
			if n.ref.GroupKind() == statefulSet {
				if claims := claimNames(n); len(claims) > 0 {
					msg += fmt.Sprintf("; its volumes are new and empty (%s), %s's stay with their data", strings.Join(claims, ", "), o.ref.Name)
				}
			}
			out = append(out, Risk{Code: DuplicateWorkload, Object: n.ref, Message: msg})
			for _, s := range p.Objects {
				if s.Ref.GroupKind() != service || s.Ref.Namespace != n.ref.Namespace || s.Action == Delete {
					continue
				}
				u := desired[s.Ref]
				if u == nil {
					continue
				}
				sel, ok := field(u, "spec", "selector").(map[string]any)
				if !ok || len(sel) == 0 {
					continue
				}
				set := labels.Set{}
				for k, v := range sel {
					set[k], _ = v.(string)
				}
				if set.AsSelector().Matches(n.pods) && o.pods != nil && set.AsSelector().Matches(o.pods) {
					out = append(out, Risk{Code: DuplicateWorkload, Object: s.Ref, Message: fmt.Sprintf(
						"%s selects the pods of both %s and %s while both run: it sends traffic to both", s.Ref, o.ref, n.ref)})
				}
			}
		}
	}
	return out
}

// claimNames are the first PersistentVolumeClaims a StatefulSet makes:
// <template>-<name>-0 for each volumeClaimTemplate.
func claimNames(w workload) []string {
	tpls, _ := field(w.u, "spec", "volumeClaimTemplates").([]any)
	var out []string
	for _, t := range tpls {
		m, _ := t.(map[string]any)
		md, _ := m["metadata"].(map[string]any)
		if name, _ := md["name"].(string); name != "" {
			out = append(out, name+"-"+w.ref.Name+"-0")
		}
	}
	return out
}
