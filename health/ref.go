package health

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ObjectRef identifies one Kubernetes object. It is cozy-aio's one object
// reference: apply records its inventories and change sets with it, a
// Waiter waits for it, and bootstrap keeps its inventory in it. It lives
// here, in the lowest of these layers, because each of them imports health
// and health imports none of them.
type ObjectRef struct {
	Group     string
	Version   string
	Kind      string
	Namespace string
	Name      string
}

// RefOf returns the reference of u.
func RefOf(u *unstructured.Unstructured) ObjectRef {
	gvk := u.GroupVersionKind()
	return ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
}

// GroupVersionKind returns the object's GVK.
func (r ObjectRef) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
}

// String returns Kind/namespace/name, or Kind/name for a cluster-scoped
// object: the form every error of cozy-aio uses.
func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

// ID returns the object's identity without its version, in the format of
// Flux's inventory entries: namespace_name_group_kind.
func (r ObjectRef) ID() string {
	return r.Namespace + "_" + r.Name + "_" + r.Group + "_" + r.Kind
}

// ParseID is the inverse of ID: it returns the reference of a Flux
// inventory entry (id, version).
func ParseID(id, version string) (ObjectRef, error) {
	// Names and namespaces cannot contain "_", groups and kinds neither, so
	// the split is unambiguous.
	parts := strings.Split(id, "_")
	if len(parts) != 4 {
		return ObjectRef{}, fmt.Errorf("inventory entry %q: want namespace_name_group_kind", id)
	}
	return ObjectRef{Namespace: parts[0], Name: parts[1], Group: parts[2], Kind: parts[3], Version: version}, nil
}

func (r ObjectRef) groupKind() schema.GroupKind {
	return schema.GroupKind{Group: r.Group, Kind: r.Kind}
}
