package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	ssautils "github.com/fluxcd/pkg/ssa/utils"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cozystack/cozy-aio/health"
)

// ImmutablePolicy is what Apply does when the API server rejects an update
// because it changes an immutable field.
type ImmutablePolicy string

const (
	// ImmutableFail returns an *ImmutableError naming the object and the
	// field. It is the default.
	ImmutableFail ImmutablePolicy = "Fail"
	// ImmutableRecreate deletes the object (background propagation: its
	// dependents are deleted too), waits until it is gone and creates it
	// again. Suits a Job.
	ImmutableRecreate ImmutablePolicy = "Recreate"
	// ImmutableOrphanRecreate deletes the object with orphan propagation,
	// so its dependents (the Pods and PVCs of a StatefulSet) survive, waits
	// until the garbage collector has orphaned them and the object is gone,
	// and creates it again; the new object's controller takes them over. Suits a
	// StatefulSet whose serviceName or volumeClaimTemplates changed.
	ImmutableOrphanRecreate ImmutablePolicy = "OrphanRecreate"
)

// ImmutablePolicyAnnotation, set on an object to one of the policies
// ("Fail", "Recreate", "OrphanRecreate"), overrides ApplyOptions for that
// object. Flux's ForceAnnotation ("kustomize.toolkit.fluxcd.io/force:
// Enabled", on the manifest or the live object) is honoured as Recreate.
const ImmutablePolicyAnnotation = "apply.cozystack.io/immutable-policy"

// ImmutableError means an update changes an immutable field and the policy
// is ImmutableFail.
type ImmutableError struct {
	Object health.ObjectRef
	// Fields are the immutable fields the update changes, as reported by
	// the API server (for example "spec.serviceName").
	Fields []string
	Err    error
}

func (e *ImmutableError) Error() string {
	fields := "an immutable field"
	if len(e.Fields) > 0 {
		fields = "immutable field " + strings.Join(e.Fields, ", ")
	}
	return fmt.Sprintf("%s: the update changes %s; set %s to Recreate or OrphanRecreate to replace the object: %v",
		e.Object, fields, ImmutablePolicyAnnotation, e.Err)
}

func (e *ImmutableError) Unwrap() error { return e.Err }

// isImmutable recognises the API server's and webhooks' immutable-field
// rejections, and only those: other invalid updates must not lead to a
// deletion.
func isImmutable(err error) bool {
	if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) && !apierrors.IsBadRequest(err) {
		return false
	}
	return strings.Contains(strings.ToLower(err.Error()), "immutable")
}

// immutableFields returns the fields an immutable-field error names.
func immutableFields(err error) []string {
	var se apierrors.APIStatus
	if !errors.As(err, &se) || se.Status().Details == nil {
		return nil
	}
	var fields, all []string
	for _, c := range se.Status().Details.Causes {
		if c.Field == "" {
			continue
		}
		all = append(all, c.Field)
		if strings.Contains(strings.ToLower(c.Message), "immutable") {
			fields = append(fields, c.Field)
		}
	}
	if len(fields) == 0 {
		return all
	}
	return fields
}

func (a *Applier) policyFor(o *unstructured.Unstructured, opts ApplyOptions) (ImmutablePolicy, error) {
	ann := o.GetAnnotations()
	if p, ok := ann[ImmutablePolicyAnnotation]; ok {
		switch ImmutablePolicy(p) {
		case ImmutableFail, ImmutableRecreate, ImmutableOrphanRecreate:
			return ImmutablePolicy(p), nil
		}
		return "", fmt.Errorf("%s: annotation %s: unknown policy %q (want Fail, Recreate or OrphanRecreate)", health.RefOf(o), ImmutablePolicyAnnotation, p)
	}
	if ssautils.AnyInMetadata(o, forceSelector) {
		return ImmutableRecreate, nil
	}
	if p, ok := opts.KindPolicies[o.GroupVersionKind().GroupKind()]; ok {
		return p, nil
	}
	if opts.ImmutablePolicy == "" {
		return ImmutableFail, nil
	}
	return opts.ImmutablePolicy, nil
}

// handleImmutable applies the immutable-field policy after the API server
// rejected the apply of o with applyErr.
func (a *Applier) handleImmutable(ctx context.Context, m *meta.RESTMapping, ref health.ObjectRef, o *unstructured.Unstructured,
	body []byte, applyErr error, opts ApplyOptions) (int, string, string, error) {
	policy, err := a.policyFor(o, opts)
	if err != nil {
		return 0, "", "", err
	}
	fields := immutableFields(applyErr)
	if policy == ImmutableFail {
		return 0, "", "", &ImmutableError{Object: ref, Fields: fields, Err: applyErr}
	}
	propagation := metav1.DeletePropagationBackground
	if policy == ImmutableOrphanRecreate {
		propagation = metav1.DeletePropagationOrphan
	}
	if err := a.deleteAndWait(ctx, m, ref, propagation, opts.WaitTimeout); err != nil {
		return 0, "", "", err
	}
	code, rv, err := a.patch(ctx, m, ref, body)
	if err != nil {
		return 0, "", "", a.describe(ref, "re-create", err)
	}
	if code == http.StatusCreated {
		code = http.StatusOK // report Configured: the object existed before
	}
	detail := fmt.Sprintf("re-created (%s) to change immutable field %s", policy, strings.Join(fields, ", "))
	return code, rv, detail, nil
}

// deleteAndWait deletes the object with the given propagation and waits
// until the API server no longer has it.
func (a *Applier) deleteAndWait(ctx context.Context, m *meta.RESTMapping, ref health.ObjectRef, propagation metav1.DeletionPropagation, timeout time.Duration) error {
	body, _ := json.Marshal(metav1.DeleteOptions{
		TypeMeta:          metav1.TypeMeta{APIVersion: "v1", Kind: "DeleteOptions"},
		PropagationPolicy: &propagation,
	})
	err := a.rest.Delete().AbsPath(objectPath(m, ref)).Body(body).Do(ctx).Error()
	if err != nil && !isNotFound(err) {
		return a.describe(ref, "delete", err)
	}
	if a.opts.Cache != nil {
		a.opts.Cache.forget(m.Resource, ref)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := a.getObjectMeta(ctx, m, ref)
		if isNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return fmt.Errorf("%s: waiting for the deletion (%s propagation) before re-creating: %w", ref, propagation, err)
	}
	return nil
}
