package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cozystack/cozy-aio/health"
)

// PruneAnnotation set to "disabled" on a live object keeps Prune from
// deleting it (Flux's annotation).
const PruneAnnotation = "kustomize.toolkit.fluxcd.io/prune"

// PruneOptions configures one Prune. The zero value works.
type PruneOptions struct {
	// Owner, when it has a name, restricts Prune to objects that carry
	// exactly its labels (see Owner): an object without them, or with
	// another owner's, belongs to someone else and is skipped.
	// Default: no owner check.
	Owner Owner
	// Propagation is the deletion propagation policy. Default: Background.
	Propagation metav1.DeletionPropagation
	// WaitTimeout, when set, makes Prune wait until every deleted object
	// is gone (its finalizers ran), as Flux's deletionPolicy
	// WaitForTermination; a timeout is an error naming what is left.
	// Default: 0, no wait.
	WaitTimeout time.Duration
}

// Prune deletes the objects refs, typically Inventory.Stale of the previous
// and the new inventory. It deletes namespaced and ordinary objects first
// and CRDs and Namespaces last, so custom resources and namespace contents
// go before what holds them. An object already gone is reported Deleted; an
// object annotated PruneAnnotation: disabled, or owned by another owner, is
// Skipped with the reason in Change.Detail.
func (a *Applier) Prune(ctx context.Context, refs []health.ObjectRef, opts PruneOptions) (ChangeSet, error) {
	if opts.Propagation == "" {
		opts.Propagation = metav1.DeletePropagationBackground
	}
	var byStage [stageCount][]health.ObjectRef
	for _, r := range refs {
		byStage[stageOfRef(r)] = append(byStage[stageOfRef(r)], r)
	}
	var cs ChangeSet
	for i := stageCount - 1; i >= 0; i-- {
		changes, err := a.pruneStage(ctx, byStage[i], opts)
		cs.Changes = append(cs.Changes, changes...)
		if err != nil {
			return cs, err
		}
	}
	return cs, nil
}

func stageOfRef(r health.ObjectRef) int {
	switch {
	case r.Group == "apiextensions.k8s.io" && r.Kind == "CustomResourceDefinition",
		r.Group == "" && r.Kind == "Namespace":
		return stageDefinitions
	case len(r.Kind) > 5 && r.Kind[len(r.Kind)-5:] == "Class":
		return stageClasses
	}
	return stageRest
}

func (a *Applier) pruneStage(ctx context.Context, refs []health.ObjectRef, opts PruneOptions) ([]Change, error) {
	changes := make([]Change, len(refs))
	errs := make([]error, len(refs))
	sem := make(chan struct{}, a.opts.Concurrency)
	var wg sync.WaitGroup
	for i, r := range refs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			changes[i], errs[i] = a.pruneOne(ctx, r, opts)
		}()
	}
	wg.Wait()
	out := changes[:0]
	for i := range changes {
		if errs[i] == nil {
			out = append(out, changes[i])
		}
	}
	return out, errors.Join(errs...)
}

func (a *Applier) pruneOne(ctx context.Context, ref health.ObjectRef, opts PruneOptions) (Change, error) {
	m, err := a.mapping(ref)
	if err != nil {
		if _, ok := errors.AsType[*UnknownKindError](err); ok {
			// The kind is gone (its CRD was removed): so is the object.
			return Change{Object: ref, Action: Deleted, Detail: "kind no longer served"}, nil
		}
		return Change{}, err
	}
	om, err := a.getObjectMeta(ctx, m, ref)
	if isNotFound(err) {
		return Change{Object: ref, Action: Deleted, Detail: "already gone"}, nil
	}
	if err != nil {
		return Change{}, a.describe(ref, "get", err)
	}
	if skip := pruneVeto(om, opts.Owner); skip != "" {
		return Change{Object: ref, Action: Skipped, Detail: skip}, nil
	}
	if om.Metadata.DeletionTimestamp != nil {
		if opts.WaitTimeout > 0 {
			if err := a.waitGone(ctx, m, ref, opts.WaitTimeout); err != nil {
				return Change{}, err
			}
		}
		return Change{Object: ref, Action: Deleted, Detail: "already terminating"}, nil
	}
	body, _ := json.Marshal(metav1.DeleteOptions{
		TypeMeta:          metav1.TypeMeta{APIVersion: "v1", Kind: "DeleteOptions"},
		PropagationPolicy: &opts.Propagation,
		// Delete only the object that was inspected.
		Preconditions: &metav1.Preconditions{UID: &om.Metadata.UID},
	})
	if err := a.rest.Delete().AbsPath(objectPath(m, ref)).Body(body).Do(ctx).Error(); err != nil && !isNotFound(err) {
		return Change{}, a.describe(ref, "delete", err)
	}
	if a.opts.Cache != nil {
		a.opts.Cache.forget(m.Resource, ref)
	}
	if opts.WaitTimeout > 0 {
		if err := a.waitGone(ctx, m, ref, opts.WaitTimeout); err != nil {
			return Change{}, err
		}
	}
	return Change{Object: ref, Action: Deleted}, nil
}

// pruneVeto returns why the live object must not be pruned, or "".
func pruneVeto(om *objectMeta, owner Owner) string {
	live := &unstructured.Unstructured{Object: map[string]any{}}
	live.SetLabels(om.Metadata.Labels)
	live.SetAnnotations(om.Metadata.Annotations)
	if ssautils.AnyInMetadata(live, pruneExclusions) {
		return PruneAnnotation + " or " + ReconcileAnnotation + ": disabled"
	}
	for k, v := range owner.labels() {
		if got := om.Metadata.Labels[k]; got != v {
			if got == "" {
				return fmt.Sprintf("not labelled %s=%s: not ours", k, v)
			}
			return fmt.Sprintf("owned by another inventory (%s=%s)", k, got)
		}
	}
	return ""
}

// pruneExclusions are the DeleteOptions.Exclusions kustomize-controller
// sets: objects labelled or annotated with them are never deleted.
var pruneExclusions = map[string]string{PruneAnnotation: "disabled", ReconcileAnnotation: "disabled"}

// waitGone polls until the object ref no longer exists.
func (a *Applier) waitGone(ctx context.Context, m *meta.RESTMapping, ref health.ObjectRef, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := a.getObjectMeta(ctx, m, ref)
		if isNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return fmt.Errorf("%s: waiting for its termination: %w", ref, err)
	}
	return nil
}
