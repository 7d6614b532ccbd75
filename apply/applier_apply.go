package apply

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/health"
)

// DefaultOwnerLabelPrefix is the prefix of the owner labels when
// Owner.LabelPrefix is empty. It is Flux's, so objects applied by Flux keep
// their owner.
const DefaultOwnerLabelPrefix = "kustomize.toolkit.fluxcd.io"

// Owner identifies who applies a set of objects, for example a
// Kustomization. Apply labels every object with <prefix>/name and
// <prefix>/namespace, and Prune deletes only objects that carry exactly
// these labels, so an object that another inventory owns is never pruned.
type Owner struct {
	// LabelPrefix is the label key prefix. Default: DefaultOwnerLabelPrefix.
	LabelPrefix string
	Name        string
	Namespace   string
	// Labels, when set, are the owner labels as they are, instead of
	// <prefix>/name and <prefix>/namespace: for an owner that is not an
	// object, such as the bootstrap directory. Default: none.
	Labels map[string]string
}

// labels returns the owner labels, or nil when the owner has none.
func (o Owner) labels() map[string]string {
	if len(o.Labels) > 0 {
		return o.Labels
	}
	if o.Name == "" {
		return nil
	}
	p := o.LabelPrefix
	if p == "" {
		p = DefaultOwnerLabelPrefix
	}
	return map[string]string{p + "/name": o.Name, p + "/namespace": o.Namespace}
}

// ApplyOptions configures one Apply. The zero value works.
type ApplyOptions struct {
	// Owner labels every object. Default: no owner labels.
	Owner Owner
	// ImmutablePolicy is what to do when an update is rejected because it
	// changes an immutable field. Default: ImmutableFail.
	ImmutablePolicy ImmutablePolicy
	// KindPolicies overrides ImmutablePolicy per kind, for example
	// {Group: "batch", Kind: "Job"}: ImmutableRecreate. The annotation
	// ImmutablePolicyAnnotation on an object overrides both. Default: none.
	KindPolicies map[schema.GroupKind]ImmutablePolicy
	// WaitTimeout bounds the wait for CRDs to be established and for
	// objects to be deleted before they are re-created. Default: 60s.
	WaitTimeout time.Duration
	// Ignore lists JSON pointers, per object selector, that Apply never
	// changes on an existing object: their live values are applied back
	// (Flux's Kustomization spec.ignore). A matching object costs a GET.
	// Default: none.
	Ignore []jsondiff.IgnoreRule

	ignore jsondiff.CompiledIgnoreRules
}

// stage numbers: CRDs and Namespaces first, then class-like objects, then
// everything else.
const (
	stageDefinitions = iota
	stageClasses
	stageRest
	stageCount
)

func stageOf(u *unstructured.Unstructured) int {
	switch {
	case ssautils.IsCRD(u) || ssautils.IsNamespace(u):
		return stageDefinitions
	case ssautils.IsClassDefinition(u):
		return stageClasses
	}
	return stageRest
}

// Stages splits objs into the three apply stages, keeping their order.
func Stages(objs []*unstructured.Unstructured) [3][]*unstructured.Unstructured {
	var s [3][]*unstructured.Unstructured
	for _, o := range objs {
		i := stageOf(o)
		s[i] = append(s[i], o)
	}
	return s
}

// Apply server-side applies objs with force-conflicts, in stages:
//  1. CustomResourceDefinitions and Namespaces, then it waits until the
//     CRDs are established;
//  2. class-like objects (StorageClass, IngressClass, PriorityClass,
//     RuntimeClass: any kind whose name ends in "Class");
//  3. everything else.
//
// So one set that holds a CRD and custom resources of it applies in one
// call. Objects of a stage are written concurrently. Apply returns a Change
// for every object it handled; when some objects fail it still applies the
// rest of their stage, returns the errors joined, and stops before the next
// stage. The objects passed in are not modified.
func (a *Applier) Apply(ctx context.Context, objs []*unstructured.Unstructured, opts ApplyOptions) (ChangeSet, error) {
	if opts.WaitTimeout == 0 {
		opts.WaitTimeout = 60 * time.Second
	}
	if err := validateObjects(objs); err != nil {
		return ChangeSet{}, err
	}
	if len(opts.Ignore) > 0 {
		var err error
		if opts.ignore, err = jsondiff.CompileIgnoreRules(opts.Ignore); err != nil {
			return ChangeSet{}, fmt.Errorf("ignore rules: %w", err)
		}
	}
	var cs ChangeSet
	for i, stage := range Stages(objs) {
		if len(stage) == 0 {
			continue
		}
		changes, err := a.applyStage(ctx, stage, opts)
		cs.Changes = append(cs.Changes, changes...)
		if err != nil {
			return cs, err
		}
		if i == stageDefinitions {
			if err := a.waitForCRDs(ctx, stage, opts.WaitTimeout); err != nil {
				return cs, err
			}
		}
	}
	return cs, nil
}

func validateObjects(objs []*unstructured.Unstructured) error {
	var errs []error
	seen := make(map[health.ObjectRef]bool, len(objs))
	for i, o := range objs {
		ref := health.RefOf(o)
		switch {
		case o.GetAPIVersion() == "" || o.GetKind() == "":
			errs = append(errs, fmt.Errorf("object %d (%s): apiVersion and kind are required", i, ref))
		case o.GetName() == "":
			errs = append(errs, fmt.Errorf("object %d (%s): metadata.name is required", i, ref))
		case seen[keyOf(ref)]:
			errs = append(errs, fmt.Errorf("%s: the object appears twice in the set", ref))
		}
		seen[keyOf(ref)] = true
	}
	return errors.Join(errs...)
}

// applyStage applies objs concurrently and returns their changes in input
// order, leaving out the objects that failed.
func (a *Applier) applyStage(ctx context.Context, objs []*unstructured.Unstructured, opts ApplyOptions) ([]Change, error) {
	changes := make([]Change, len(objs))
	errs := make([]error, len(objs))
	sem := make(chan struct{}, a.opts.Concurrency)
	var wg sync.WaitGroup
	ownerLabels := opts.Owner.labels()
	if a.opts.Cache != nil {
		a.warmCache(ctx, objs, opts.WaitTimeout)
	}
	for i, o := range objs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			changes[i], errs[i] = a.applyOne(ctx, withLabels(o, ownerLabels), opts)
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

// warmCache syncs the Cache's watches of the resources of objs before a
// stage, so that every object of the stage is checked against watched
// state. After the first apply of a kind this returns at once.
func (a *Applier) warmCache(ctx context.Context, objs []*unstructured.Unstructured, timeout time.Duration) {
	seen := map[schema.GroupVersionKind]bool{}
	var gvrs []schema.GroupVersionResource
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if seen[gvk] {
			continue
		}
		seen[gvk] = true
		if m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			gvrs = append(gvrs, m.Resource)
		}
	}
	a.opts.Cache.warm(ctx, gvrs, timeout)
}

// withLabels returns o with extra labels, copying only the maps it changes.
func withLabels(o *unstructured.Unstructured, extra map[string]string) *unstructured.Unstructured {
	if len(extra) == 0 {
		return o
	}
	obj := make(map[string]any, len(o.Object))
	for k, v := range o.Object {
		obj[k] = v
	}
	md, _ := o.Object["metadata"].(map[string]any)
	newMD := make(map[string]any, len(md)+1)
	for k, v := range md {
		newMD[k] = v
	}
	labels := map[string]any{}
	if old, ok := md["labels"].(map[string]any); ok {
		for k, v := range old {
			labels[k] = v
		}
	}
	for k, v := range extra {
		labels[k] = v
	}
	newMD["labels"] = labels
	obj["metadata"] = newMD
	return &unstructured.Unstructured{Object: obj}
}

// applyOne applies one object. It writes nothing when the Cache proves the
// write would change nothing.
func (a *Applier) applyOne(ctx context.Context, o *unstructured.Unstructured, opts ApplyOptions) (Change, error) {
	ref := health.RefOf(o)
	m, err := a.mapping(ref)
	if err != nil {
		return Change{}, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace && ref.Namespace == "" {
		return Change{}, fmt.Errorf("%s: namespace not specified for a namespaced kind", ref)
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace && ref.Namespace != "" {
		o = o.DeepCopy()
		o.SetNamespace("")
		ref.Namespace = ""
	}
	if paths := IgnoredPaths(opts.ignore, o); len(paths) > 0 {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		err := a.client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, live)
		switch {
		case err == nil:
			o = o.DeepCopy()
			if err := KeepLiveValues(o, live, paths); err != nil {
				return Change{}, fmt.Errorf("%s: ignore rules: %w", ref, err)
			}
		case !isNotFound(err):
			return Change{}, a.describe(ref, "get", err)
		}
	}
	ssautils.RemoveCABundleFromCRD(o)
	body, err := json.Marshal(o.Object)
	if err != nil {
		return Change{}, fmt.Errorf("%s: encoding: %w", ref, err)
	}
	if why := skipReason(o, nil); why != "" {
		return Change{Object: ref, Action: Skipped, Detail: why}, nil
	}
	sum := sha256.Sum256(append([]byte(a.identity+"\x00"), body...))
	prev := liveState{}
	if a.opts.Cache != nil {
		prev = a.opts.Cache.lookup(m.Resource, ref, sum)
	}
	if !prev.known {
		if prev, err = a.getMeta(ctx, m, ref); err != nil {
			return Change{}, err
		}
	}
	if prev.exists {
		// IfNotPresent is decided here, before the unchanged shortcut, so
		// that an existing object is skipped (and leaves the inventory
		// without being pruned) on every apply, as in Flux.
		live := liveMetadata(prev.labels, prev.annotations)
		if why := skipReason(o, live); why != "" {
			return Change{Object: ref, Action: Skipped, Detail: why}, nil
		}
		if ssautils.AnyInMetadata(live, forceSelector) && o.GetAnnotations()[ImmutablePolicyAnnotation] == "" {
			opts.ImmutablePolicy, opts.KindPolicies = ImmutableRecreate, nil
		}
	}
	if prev.unchanged {
		return Change{Object: ref, Action: Unchanged}, nil
	}
	detail, handedOver := "", false
	if from := a.handsOver(prev); prev.exists && len(from) > 0 {
		if err := a.handOver(ctx, o, from); err != nil {
			return Change{}, err
		}
		detail, handedOver = fmt.Sprintf("fields of %s handed over to %s", strings.Join(from, ", "), a.opts.FieldManager), true
	}
	code, rv, err := a.patch(ctx, m, ref, body)
	if err != nil {
		if !isImmutable(err) {
			return Change{}, a.describe(ref, "apply", err)
		}
		if code, rv, detail, err = a.handleImmutable(ctx, m, ref, o, body, err, opts); err != nil {
			return Change{}, err
		}
	}
	if a.opts.Cache != nil {
		a.opts.Cache.record(m.Resource, ref, sum, rv)
	}
	action := Configured
	switch {
	case code == http.StatusCreated:
		action = Created
	case prev.exists && rv == prev.resourceVersion && !handedOver:
		action = Unchanged
	}
	return Change{Object: ref, Action: action, Detail: detail}, nil
}

// liveState is what is known of an object on the server before a write.
type liveState struct {
	known           bool // false: ask the API server
	exists          bool
	resourceVersion string
	unchanged       bool // the write would change nothing
	// labels and annotations hold the selector keys of the live object.
	labels, annotations map[string]string
	// appliers are the field managers of the live object's Apply entries.
	appliers []string
}

func managerNames(entries []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, e := range entries {
		if e.Operation == metav1.ManagedFieldsOperationApply {
			out = append(out, e.Manager)
		}
	}
	return out
}

// handsOver returns the managers of Options.HandOver that applied the live
// object, other than Options.FieldManager.
func (a *Applier) handsOver(prev liveState) []string {
	var out []string
	for _, n := range prev.appliers {
		if n != a.opts.FieldManager && slices.Contains(a.opts.HandOver, n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// handOver renames the Apply entries of managers from in the live object's
// managedFields to Options.FieldManager, as Flux's ssa does for the field
// managers it takes over (one JSON patch, guarded by the resourceVersion
// read, so that entries written meanwhile are not lost).
func (a *Applier) handOver(ctx context.Context, o *unstructured.Unstructured, from []string) error {
	ref := health.RefOf(o)
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(o.GroupVersionKind())
	if err := a.client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, live); err != nil {
		return a.describe(ref, "get", err)
	}
	managers := make([]ssa.FieldManager, 0, len(from))
	for _, n := range from {
		managers = append(managers, ssa.FieldManager{Name: n, OperationType: metav1.ManagedFieldsOperationApply, ExactMatch: true})
	}
	patches, err := ssa.PatchReplaceFieldsManagers(live, managers, a.opts.FieldManager)
	if err != nil || len(patches) == 0 {
		return err
	}
	ops := []any{map[string]string{"op": "test", "path": "/metadata/resourceVersion", "value": live.GetResourceVersion()}}
	for _, p := range patches {
		ops = append(ops, p)
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if err := a.client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, raw)); err != nil {
		return a.describe(ref, "hand over the managed fields", err)
	}
	return nil
}

type objectMeta struct {
	Metadata struct {
		ResourceVersion   string            `json:"resourceVersion"`
		UID               types.UID         `json:"uid"`
		Labels            map[string]string `json:"labels"`
		Annotations       map[string]string `json:"annotations"`
		DeletionTimestamp *string           `json:"deletionTimestamp"`
		Finalizers        []string          `json:"finalizers"`
		// ManagedFields are decoded without their fields.
		ManagedFields []metav1.ManagedFieldsEntry `json:"managedFields"`
	} `json:"metadata"`
}

const metadataAccept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

// getMeta reads the metadata of an object, or reports that it is absent.
func (a *Applier) getMeta(ctx context.Context, m *meta.RESTMapping, ref health.ObjectRef) (liveState, error) {
	om, err := a.getObjectMeta(ctx, m, ref)
	if err != nil {
		if isNotFound(err) {
			return liveState{known: true}, nil
		}
		return liveState{}, a.describe(ref, "get", err)
	}
	return liveState{known: true, exists: true, resourceVersion: om.Metadata.ResourceVersion,
		labels: selectorSubset(om.Metadata.Labels), annotations: selectorSubset(om.Metadata.Annotations),
		appliers: managerNames(om.Metadata.ManagedFields)}, nil
}

func (a *Applier) getObjectMeta(ctx context.Context, m *meta.RESTMapping, ref health.ObjectRef) (*objectMeta, error) {
	res := a.rest.Get().AbsPath(objectPath(m, ref)).SetHeader("Accept", metadataAccept).Do(ctx)
	if err := res.Error(); err != nil {
		return nil, err // Error, unlike Raw, decodes the API server's Status
	}
	raw, _ := res.Raw()
	var om objectMeta
	if err := json.Unmarshal(raw, &om); err != nil {
		return nil, fmt.Errorf("%s: decoding the metadata: %w", ref, err)
	}
	return &om, nil
}

// patch sends one server-side apply with force-conflicts and returns the
// HTTP status code and the new resourceVersion.
func (a *Applier) patch(ctx context.Context, m *meta.RESTMapping, ref health.ObjectRef, body []byte) (int, string, error) {
	var code int
	res := a.rest.Patch(types.ApplyPatchType).
		AbsPath(objectPath(m, ref)).
		Param("fieldManager", a.opts.FieldManager).
		Param("force", "true").
		SetHeader("Accept", metadataAccept).
		Body(body).
		Do(ctx).
		StatusCode(&code)
	if err := res.Error(); err != nil {
		return code, "", err
	}
	raw, _ := res.Raw()
	var om objectMeta
	if err := json.Unmarshal(raw, &om); err != nil {
		return code, "", fmt.Errorf("%s: decoding the apply response: %w", ref, err)
	}
	return code, om.Metadata.ResourceVersion, nil
}
