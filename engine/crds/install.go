package crds

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cozystack/cozy-aio/apply"
)

// DigestAnnotation records, on each CRD Install applies, the digest of
// what it applied: a later start applies only the CRDs whose digest
// differs, which spares the API server six large no-op applies per start.
const DigestAnnotation = "cozy-aio.cozystack.io/crd-digest"

// Install server-side applies the embedded CRDs that are missing or, unless
// onlyMissing, differ from the embedded ones (by DigestAnnotation), and
// waits until those are Established and served. It reads only the CRDs'
// metadata and applies one CRD at a time: a CRD decodes into a large tree,
// and this runs at every start. An empty fieldManager is
// apply.DefaultFieldManager.
//
// A live CRD newer than the embedded one, which has stored objects in a
// version the embedded CRD does not list (the API server would refuse the
// update), is left as it is and logged to ctx's logger.
//
// It goes through apply.Applier like every other write of objects: its
// staged Apply waits for the CRDs to be Established before it returns.
func Install(ctx context.Context, cfg *rest.Config, fieldManager string, onlyMissing bool) error {
	all, err := All()
	if err != nil {
		return err
	}
	a, err := apply.New(cfg, apply.Options{FieldManager: fieldManager, Concurrency: 1})
	if err != nil {
		return err
	}
	var changed []*unstructured.Unstructured
	for _, crd := range all {
		u, err := crdToApply(ctx, a.Client(), crd, onlyMissing)
		if err != nil {
			return err
		}
		if u != nil {
			changed = append(changed, u)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	if _, err := a.Apply(ctx, changed, apply.ApplyOptions{}); err != nil {
		return fmt.Errorf("installing the CRDs: %w", err)
	}
	return nil
}

// crdToApply returns crd with its digest annotation, or nil when the live
// CRD carries the same digest (or exists at all, with onlyMissing), or is
// newer than crd.
func crdToApply(ctx context.Context, c client.Reader, crd *apiextensionsv1.CustomResourceDefinition, onlyMissing bool) (*unstructured.Unstructured, error) {
	crd.TypeMeta.APIVersion = "apiextensions.k8s.io/v1"
	crd.TypeMeta.Kind = "CustomResourceDefinition"
	crd.ManagedFields = nil
	crd.Annotations = maps.Clone(crd.Annotations)
	if crd.Annotations == nil {
		crd.Annotations = map[string]string{}
	}
	delete(crd.Annotations, DigestAnnotation)
	b, err := json.Marshal(crd)
	if err != nil {
		return nil, err
	}
	digest := fmt.Sprintf("sha256:%x", sha256.Sum256(b))
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	err = c.Get(ctx, client.ObjectKey{Name: crd.Name}, live)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading CRD %s: %w", crd.Name, err)
	}
	if err == nil && (onlyMissing || live.Annotations[DigestAnnotation] == digest) {
		return nil, nil
	}
	if err == nil {
		// It differs: read its stored versions, which only a newer CRD
		// has more of, before applying over it.
		newer, err := storedVersionsUnknown(ctx, c, crd)
		if err != nil {
			return nil, err
		}
		if len(newer) > 0 {
			log.FromContext(ctx).Info("CRD is newer than this cozy-aio's: left as it is", "crd", crd.Name,
				"storedVersions", newer)
			return nil, nil
		}
	}
	crd.Annotations[DigestAnnotation] = digest
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return nil, fmt.Errorf("CRD %s: %w", crd.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	// A typed object carries an empty status and creationTimestamp that an
	// apply must not send.
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// storedVersionsUnknown returns the versions the live CRD of crd's name
// has stored objects in and crd does not list.
func storedVersionsUnknown(ctx context.Context, c client.Reader, crd *apiextensionsv1.CustomResourceDefinition) ([]string, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, live); err != nil {
		return nil, fmt.Errorf("reading CRD %s: %w", crd.Name, err)
	}
	stored, _, err := unstructured.NestedStringSlice(live.Object, "status", "storedVersions")
	if err != nil {
		return nil, fmt.Errorf("CRD %s: status.storedVersions: %w", crd.Name, err)
	}
	return unknownVersions(crd, stored), nil
}

// unknownVersions returns the versions of stored that crd does not list.
func unknownVersions(crd *apiextensionsv1.CustomResourceDefinition, stored []string) []string {
	var out []string
	for _, v := range stored {
		if !slices.ContainsFunc(crd.Spec.Versions, func(cv apiextensionsv1.CustomResourceDefinitionVersion) bool { return cv.Name == v }) {
			out = append(out, v)
		}
	}
	return out
}
