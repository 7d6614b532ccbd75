package health

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ObjectRef identifies one object to wait for. apply.ObjectRef has the same
// fields, so one converts to the other with a plain type conversion.
type ObjectRef struct {
	Group     string
	Version   string
	Kind      string
	Namespace string
	Name      string
}

// RefOf returns the reference of u.
func RefOf(u *unstructured.Unstructured) ObjectRef { return refOf(u) }

func refOf(u *unstructured.Unstructured) ObjectRef {
	gvk := u.GroupVersionKind()
	return ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
}

// String returns Kind/namespace/name, or Kind/name.
func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

func (r ObjectRef) groupKind() schema.GroupKind {
	return schema.GroupKind{Group: r.Group, Kind: r.Kind}
}
