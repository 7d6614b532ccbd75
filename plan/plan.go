package plan

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Ref names an object of a plan. The version is left out: an upgrade may
// move an object to another version of its kind.
type Ref struct {
	Group, Kind, Namespace, Name string
}

// RefOf returns the Ref of u.
func RefOf(u *unstructured.Unstructured) Ref {
	gvk := u.GroupVersionKind()
	return Ref{Group: gvk.Group, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
}

// GroupKind returns r's group and kind.
func (r Ref) GroupKind() schema.GroupKind { return schema.GroupKind{Group: r.Group, Kind: r.Kind} }

// String is Kind/namespace/name, or Kind/name for a cluster-scoped object.
func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

// Action is what applying the new state does to one object.
type Action string

const (
	// Create: the object does not exist and will be created.
	Create Action = "create"
	// Update: the object exists and the fields the new state sets differ.
	Update Action = "update"
	// Delete: the current state holds the object and the new one drops it.
	Delete Action = "delete"
	// Orphan: the new state drops the object, which stays in the cluster
	// unmanaged (Input.Kept: Helm's resource-policy keep, Flux's prune
	// disabled).
	Orphan Action = "orphan"
	// Unchanged: the object exists as the new state sets it.
	Unchanged Action = "unchanged"
)

// Change is one field an update changes: its path and its values before
// and after, as JSON, "" where absent. A Secret's values read Redacted.
type Change struct {
	Path string `json:"path"`
	Old  string `json:"old,omitempty"`
	New  string `json:"new,omitempty"`
}

// Redacted stands for a Secret's value in a Change.
const Redacted = "<redacted>"

// Object is the plan of one object.
type Object struct {
	Ref     Ref      `json:"ref"`
	Action  Action   `json:"action"`
	Changes []Change `json:"changes,omitempty"`
}

// Code names a kind of risk; codes are stable.
type Code string

// The risks a plan names.
const (
	// ImmutableChange: an update changes a field the API server refuses to
	// change, or whose change forces the object to be created again.
	ImmutableChange Code = "ImmutableChange"
	// DuplicateWorkload: a workload is created whose pods the selector of
	// another of its kind (deleted or staying) selects, or a Service
	// selects the pods of both; a StatefulSet renamed starts on new, empty
	// volumes.
	DuplicateWorkload Code = "DuplicateWorkload"
	// DataLoss: a PersistentVolumeClaim, PersistentVolume, Namespace or
	// CustomResourceDefinition is deleted, or an object the current state
	// marks helm.sh/resource-policy: keep.
	DataLoss Code = "DataLoss"
	// CRDVersionRemoval: a CustomResourceDefinition update drops a version
	// objects are stored in.
	CRDVersionRemoval Code = "CRDVersionRemoval"
	// OwnershipChange: the new state takes over an object another release,
	// inventory or field manager owns.
	OwnershipChange Code = "OwnershipChange"
	// Hooks: chart hooks will run (information, not a danger).
	Hooks Code = "Hooks"
)

// Risk is one risk of a plan: its code, the object, and why.
type Risk struct {
	Code    Code   `json:"code"`
	Object  Ref    `json:"object"`
	Message string `json:"message"`
}

// Plan is what applying a new state does, object by object, and its risks.
type Plan struct {
	Objects []Object `json:"objects"`
	Risks   []Risk   `json:"risks,omitempty"`
	// Hash identifies the new state and what it does: an approval names it.
	Hash string `json:"hash"`
}

// Risky reports whether the plan has a risk other than Hooks.
func (p *Plan) Risky() bool {
	return slices.ContainsFunc(p.Risks, func(r Risk) bool { return r.Code != Hooks })
}

// Changed reports whether applying the plan changes the cluster.
func (p *Plan) Changed() bool {
	return slices.ContainsFunc(p.Objects, func(o Object) bool { return o.Action != Unchanged })
}

// Owner identifies who applies the new state, to tell whose objects are
// another's. Its zero value knows no owner: no OwnershipChange is found.
type Owner struct {
	// Release names the Helm release ("namespace/name") that applies the
	// new state: a live object whose meta.helm.sh annotations name another
	// release belongs to that one.
	Release string
	// Inventory names the Kustomization ("namespace/name") that applies
	// the new state: a live object whose kustomize.toolkit.fluxcd.io
	// labels name another Kustomization belongs to that one.
	Inventory string
	// FieldManager is the field manager of the applies: a live object
	// whose managedFields hold an Apply of another manager has fields
	// that manager owns.
	FieldManager string
}

// Input is what Compute plans from.
type Input struct {
	// Current are the objects the current release (its manifest) or
	// inventory holds; empty for a first install.
	Current []*unstructured.Unstructured
	// Desired are the objects of the new state, in the order they are
	// applied: as rendered, or as the API server's server-side dry-run
	// returns them (DryRun). Of an object given twice, the last counts.
	Desired []*unstructured.Unstructured
	// DryRun tells which desired objects are server-side dry-run results,
	// whole objects, so that a field live has and the result lacks is one
	// the apply removes. The others are as rendered, and only the fields
	// they set count, as with a server-side apply (an update the API server
	// refuses, such as an immutable field's, has no dry-run result). Nil:
	// none.
	DryRun func(Ref) bool
	// Hooks are the chart hooks the new state runs (objects with the
	// helm.sh/hook annotation).
	Hooks []*unstructured.Unstructured
	// Live returns the object in the cluster, nil when it does not exist.
	// Nil: the current objects stand for the live ones.
	Live func(Ref) *unstructured.Unstructured
	// Kept tells whether an object the new state drops stays in the
	// cluster (Orphan) instead of being deleted. Nil: every dropped object
	// is deleted.
	Kept func(current *unstructured.Unstructured) bool
	// StoredObjects tells whether objects of a version of a custom
	// resource are stored, for a version a CRD update stops serving
	// (beyond its status.storedVersions). Nil: only storedVersions count.
	StoredObjects func(group, version, plural string) bool
	// ImmutablePolicy returns what the applier does with an immutable
	// change of a desired object ("Fail", "Recreate", "OrphanRecreate"),
	// said in the risk. Nil, or "": nothing is said.
	ImmutablePolicy func(desired *unstructured.Unstructured) string
	// Owner tells whose objects are another's.
	Owner Owner
	// Revision names the new state where its objects do not tell it
	// apart (a chart archive's and its values' digest, a source
	// revision): part of the hash, so that a new revision that renders
	// the same objects still makes a new plan to approve. Default: "".
	Revision string
}

// Compute plans in: the action on each object, the risks of the whole
// change, and the plan's hash. It reads nothing but in.
func Compute(in Input) (*Plan, error) {
	live := in.Live
	current := map[Ref]*unstructured.Unstructured{}
	for _, u := range in.Current {
		current[RefOf(u)] = u
	}
	if live == nil {
		live = func(r Ref) *unstructured.Unstructured { return current[r] }
	}
	p := &Plan{}
	// An object given twice (a chart's CRD in crds/ and in its templates)
	// is applied twice: the last one stays.
	desired := map[Ref]*unstructured.Unstructured{}
	var order []Ref
	for _, u := range in.Desired {
		r := RefOf(u)
		if _, dup := desired[r]; !dup {
			order = append(order, r)
		}
		desired[r] = u
	}
	for _, r := range order {
		u := desired[r]
		o := Object{Ref: r, Action: Create}
		if l := live(r); l != nil {
			o.Changes = diff(r, l, u, in.DryRun != nil && in.DryRun(r))
			o.Action = Unchanged
			if len(o.Changes) > 0 {
				o.Action = Update
			}
		}
		p.Objects = append(p.Objects, o)
	}
	for _, u := range in.Current {
		r := RefOf(u)
		if _, ok := desired[r]; ok {
			continue
		}
		a := Delete
		if in.Kept != nil && in.Kept(u) {
			a = Orphan
		}
		p.Objects = append(p.Objects, Object{Ref: r, Action: a})
	}
	slices.SortFunc(p.Objects, func(a, b Object) int { return compareRefs(a.Ref, b.Ref) })
	p.Risks = risks(in, p, current, desired, live)
	slices.SortStableFunc(p.Risks, func(a, b Risk) int {
		if c := strings.Compare(string(a.Code), string(b.Code)); c != 0 {
			return c
		}
		return compareRefs(a.Object, b.Object)
	})
	h, err := hash(in, p)
	if err != nil {
		return nil, err
	}
	p.Hash = h
	return p, nil
}

func compareRefs(a, b Ref) int {
	for _, c := range [][2]string{{a.Group, b.Group}, {a.Kind, b.Kind}, {a.Namespace, b.Namespace}, {a.Name, b.Name}} {
		if d := strings.Compare(c[0], c[1]); d != 0 {
			return d
		}
	}
	return 0
}

// hash is the SHA-256 of the new state's revision, its desired objects
// and hooks (sorted, as JSON) and each object's action: the same new state against the same cluster
// gives the same hash; a new revision or a cluster that moved gives
// another.
func hash(in Input, p *Plan) (string, error) {
	objs := append(slices.Clone(in.Desired), in.Hooks...)
	slices.SortFunc(objs, func(a, b *unstructured.Unstructured) int { return compareRefs(RefOf(a), RefOf(b)) })
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", in.Revision)
	enc := json.NewEncoder(h)
	for _, u := range objs {
		if err := enc.Encode(u.Object); err != nil {
			return "", fmt.Errorf("%s: %w", RefOf(u), err)
		}
	}
	for _, o := range p.Objects {
		fmt.Fprintf(h, "%s %s\n", o.Ref, o.Action)
	}
	return fmt.Sprintf("sha256:%x", h.Sum(nil)), nil
}
