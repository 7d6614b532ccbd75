package generator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/generate"
)

// Options are the engine's options the generators follow.
type Options struct {
	// DefaultInterval is how often a generator is reconciled.
	DefaultInterval time.Duration
	// FieldManager owns the ExternalArtifacts and Namespaces written.
	FieldManager string
	// Restricted refuses cross-namespace references; DefaultServiceAccount
	// is then the account a generator's other namespaces are written as.
	Restricted            bool
	DefaultServiceAccount string
	// MemoryBytes is the budget of the builds in memory (generate.NewBudget).
	MemoryBytes int64
	// PrivateExtraction gives every reconcile source trees of its own
	// instead of the shared ones (tests).
	PrivateExtraction bool
}

// Deps is what the generators use of the engine.
type Deps struct {
	// Client reads and writes through the engine's cache.
	Client client.Client
	// Store keeps the artifacts.
	Store *source.Store
	// Finisher writes each reconcile's outcome.
	Finisher *frame.Finisher
	// Graph learns each generator's sources, which wake it.
	Graph *frame.Graph
	// Recorder records the Events about existing Namespaces a generator
	// takes over (source-watcher's Adopted reason).
	Recorder recorder.EventRecorder
	// SourceArtifact resolves a source's artifact, materialising one the
	// store lacks.
	SourceArtifact func(ctx context.Context, self frame.Ref, kind, namespace, name string) (source.Artifact, frame.Outcome, bool)
	// Slot bounds the rebuilds in flight.
	Slot func(context.Context) (func(), error)
}

// Reconciler composes ExternalArtifacts from several
// sources, as Flux's source-watcher does.
type Reconciler struct {
	deps     Deps
	opts     Options
	extracts *extractCache
	memory   generatorBudget
}

// New returns the ArtifactGenerator reconciler. Its extracted-tree cache
// runs with the manager (Extracts).
func New(d Deps, o Options) *Reconciler {
	return &Reconciler{deps: d, opts: o, extracts: newExtractCache(d.Store, o.PrivateExtraction)}
}

// Extracts is the cache of extracted source trees, a Runnable that drops
// trees no generator read for a while.
func (r *Reconciler) Extracts() manager.Runnable { return r.extracts }

// generatorBudget is the memory budget all generator builds share, the
// reconciler's and the rebuilds' (Rebuild), made on first use
// (Options.MemoryBytes).
type generatorBudget struct {
	once sync.Once
	b    *generate.Budget
}

func (r *Reconciler) generatorMemory() *generate.Budget {
	r.memory.once.Do(func() { r.memory.b = generate.NewBudget(r.opts.MemoryBytes) })
	return r.memory.b
}

func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &swv1beta1.ArtifactGenerator{}
	if err := r.deps.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	self := frame.Ref{Kind: swv1beta1.ArtifactGeneratorKind, Namespace: obj.Namespace, Name: obj.Name}
	if !obj.DeletionTimestamp.IsZero() {
		r.deps.Graph.Remove(self)
		return ctrl.Result{}, r.finalize(ctx, obj)
	}
	// As source-watcher: the finalizer deletes the generated
	// ExternalArtifacts with the generator.
	if !controllerutil.ContainsFinalizer(obj, swv1beta1.Finalizer) {
		patch := client.MergeFrom(obj.DeepCopy())
		controllerutil.AddFinalizer(obj, swv1beta1.Finalizer)
		if err := r.deps.Client.Patch(ctx, obj, patch); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	if obj.IsDisabled() {
		return ctrl.Result{}, nil
	}
	start := time.Now()
	orig := obj.DeepCopy()
	out := r.reconcile(ctx, obj, self)
	return r.deps.Finisher.Finish(ctx, swv1beta1.ArtifactGeneratorKind, obj, orig, start, out, frame.Timing{Interval: r.opts.DefaultInterval, Retry: time.Minute})
}

func (r *Reconciler) reconcile(ctx context.Context, obj *swv1beta1.ArtifactGenerator, self frame.Ref) frame.Outcome {
	var srcRefs []frame.Ref
	for _, s := range obj.Spec.Sources {
		srcRefs = append(srcRefs, frame.SourceRefOf(self, s.Kind, s.Namespace, s.Name))
	}
	r.deps.Graph.Set(self, srcRefs)
	sources, done, out, ok := r.generatorSources(ctx, obj, self)
	if !ok {
		return out
	}
	defer done()
	outputs, err := generatorOutputs(obj, sources)
	if err != nil {
		return frame.Stalled(swv1beta1.ValidationFailedReason, fmt.Errorf("%s: %w", self, err))
	}
	type built struct {
		art    source.Artifact
		inputs map[string]*apiextensionsv1.JSON
	}
	builds := make([]built, len(outputs))
	arts := map[string]source.Artifact{}
	for i, o := range outputs {
		art, err := buildOutput(ctx, r.deps.Store, sources, o, generate.BuildOptions{Memory: r.generatorMemory()})
		if err != nil {
			return frame.Failed(meta.BuildFailedReason, fmt.Errorf("%s: artifact %s/%s: %w", self, o.namespace, o.Name, err))
		}
		inputs, err := r.exportedInputs(ctx, sources, art, o.InputsFrom)
		if err != nil {
			return frame.Failed(meta.BuildFailedReason, fmt.Errorf("%s: artifact %s/%s: inputsFrom %s: %w", self, o.namespace, o.Name, o.InputsFrom, err))
		}
		builds[i] = built{art, inputs}
		arts[o.namespace+"/"+o.Name] = art
	}
	// Managed namespaces first, so that the artifacts have somewhere to go.
	var inventory []swv1beta1.InventoryEntry
	if obj.ManagesNamespaces() {
		entries, err := r.reconcileNamespaces(ctx, obj, outputs, arts, sources)
		if err != nil {
			var nsErr *namespaceError
			if errors.As(err, &nsErr) {
				return nsErr.outcome(self)
			}
			return frame.Failed(meta.ReconciliationFailedReason, fmt.Errorf("%s: %w", self, err))
		}
		inventory = entries
	}
	if err := r.authorize(ctx, obj, outputs); err != nil {
		return frame.Failed(swv1beta1.AccessDeniedReason, fmt.Errorf("%s: %w", self, err)).At(string(swv1beta1.ActionPublish))
	}
	for i, o := range outputs {
		art := builds[i].art
		if err := r.writeExternalArtifact(ctx, obj, o, art, builds[i].inputs); err != nil {
			reason := meta.ReconciliationFailedReason
			if errors.Is(err, errOwnershipConflict) {
				reason = swv1beta1.OwnershipConflictReason
			}
			return frame.Failed(reason, fmt.Errorf("%s: %w", self, err)).At(string(swv1beta1.ActionPublish))
		}
		if _, err := r.deps.Store.GC(ctx, outputObject(o.namespace, o.Name), art); err != nil {
			return frame.Failed(meta.ArtifactFailedReason, err).At(string(swv1beta1.ActionPublish))
		}
		inventory = append(inventory, swv1beta1.InventoryEntry{
			Kind: sourcev1.ExternalArtifactKind, Name: o.Name, Namespace: o.namespace, Digest: art.Digest, Filename: filepath.Base(art.Path),
		})
	}
	// Outputs the spec no longer has go, with their artifacts; managed
	// namespaces no output targets go when prune is set.
	for _, ref := range obj.Status.Inventory {
		if ref.Kind == swv1beta1.NamespaceKind || slices.ContainsFunc(inventory, func(i swv1beta1.InventoryEntry) bool {
			return i.Kind != swv1beta1.NamespaceKind && i.Name == ref.Name && i.Namespace == ref.Namespace
		}) {
			continue
		}
		if err := r.deleteOutput(ctx, obj, ref); err != nil {
			return frame.Failed(meta.ReconciliationFailedReason, fmt.Errorf("%s: %w", self, err)).At(string(swv1beta1.ActionPublish))
		}
	}
	if err := r.pruneNamespaces(ctx, obj, obj.Status.Inventory, inventory); err != nil {
		return frame.Failed(meta.ReconciliationFailedReason, fmt.Errorf("%s: spec.managedNamespaces: %w", self, err)).At(string(swv1beta1.ActionPublish))
	}
	obj.Status.Inventory = inventory
	return frame.Succeeded("reconciliation succeeded, generated %d artifact(s)", len(inventory))
}

// finalize deletes the ExternalArtifacts of a deleted generator, and
// their artifacts, then lets the generator go.
func (r *Reconciler) finalize(ctx context.Context, obj *swv1beta1.ArtifactGenerator) error {
	if !controllerutil.ContainsFinalizer(obj, swv1beta1.Finalizer) {
		return nil
	}
	for _, ref := range obj.Status.Inventory {
		if ref.Kind == swv1beta1.NamespaceKind {
			continue
		}
		if err := r.deleteOutput(ctx, obj, ref); err != nil {
			return err
		}
	}
	if err := r.pruneNamespaces(ctx, obj, obj.Status.Inventory, nil); err != nil {
		return err
	}
	patch := client.MergeFrom(obj.DeepCopy())
	controllerutil.RemoveFinalizer(obj, swv1beta1.Finalizer)
	return client.IgnoreNotFound(r.deps.Client.Patch(ctx, obj, patch))
}

// deleteOutput deletes the ExternalArtifact of an inventory entry, when
// it is still the generator's, and its stored artifacts.
func (r *Reconciler) deleteOutput(ctx context.Context, gen *swv1beta1.ArtifactGenerator, ref swv1beta1.InventoryEntry) error {
	c := r.deps.Client
	ea := &sourcev1.ExternalArtifact{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, ea)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading ExternalArtifact %s/%s: %w", ref.Namespace, ref.Name, err)
	case !generatedBy(ea, gen):
		// Another generator took the name over: its artifact stays.
		return nil
	default:
		if err := c.Delete(ctx, ea); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting ExternalArtifact %s/%s: %w", ref.Namespace, ref.Name, err)
		}
	}
	return r.deps.Store.Remove(ctx, outputObject(ref.Namespace, ref.Name))
}

// generatedBy reports whether ea's sourceRef names gen.
func generatedBy(ea *sourcev1.ExternalArtifact, gen *swv1beta1.ArtifactGenerator) bool {
	sr := ea.Spec.SourceRef
	if sr == nil || sr.Kind != swv1beta1.ArtifactGeneratorKind || sr.Name != gen.Name {
		return false
	}
	ns := sr.Namespace
	if ns == "" {
		ns = ea.Namespace
	}
	return ns == gen.Namespace
}

// generatorSources extracts the artifact of each of the generator's
// sources, materialising those the store lacks, and returns them by alias
// with a function that releases the extracted trees. The trees are shared
// with the other generators reading the same artifacts (extractCache). The
// reconciler and the rebuild of an ExternalArtifact both use it, so that
// they compose the same inputs.
func (r *Reconciler) generatorSources(ctx context.Context, obj *swv1beta1.ArtifactGenerator, self frame.Ref) (map[string]generate.Source, func(), frame.Outcome, bool) {
	var releases []func()
	done := func() {
		for _, release := range releases {
			release()
		}
	}
	sources := map[string]generate.Source{}
	for _, s := range obj.Spec.Sources {
		art, out, ok := r.deps.SourceArtifact(ctx, self, s.Kind, s.Namespace, s.Name)
		if !ok {
			done()
			return nil, nil, out, false
		}
		fsys, release, err := r.extracts.acquire(ctx, art)
		if err != nil {
			done()
			return nil, nil, frame.Failed(meta.ArtifactFailedReason, fmt.Errorf("%s: extracting source %s: %w", self, s.Name, err)).At(string(swv1beta1.ActionFetchSource)), false
		}
		releases = append(releases, release)
		// The origin revision is the source artifact's
		// org.opencontainers.image.revision, as source-watcher reads it.
		sources[s.Alias] = generate.Source{FS: fsys, Revision: art.Revision,
			OriginRevision: art.Metadata[swv1beta1.ArtifactOriginRevisionAnnotation]}
	}
	return sources, done, frame.Outcome{}, true
}

// buildOutput composes one output of a generator from its sources and
// stores it as the ExternalArtifact's artifact.
func buildOutput(ctx context.Context, store *source.Store, sources map[string]generate.Source, o generatedOutput, opts generate.BuildOptions) (source.Artifact, error) {
	spec := generate.Spec{Revision: o.Revision, OriginRevision: o.OriginRevision}
	for _, c := range o.Copy {
		spec.Copy = append(spec.Copy, generate.Copy{From: c.From, To: c.To, Exclude: c.Exclude, Strategy: generate.Strategy(c.Strategy), Optional: c.Optional})
	}
	art, _, err := generate.Build(ctx, store, outputObject(o.namespace, o.Name), sources, spec, opts)
	return art, err
}

// outputObject is the store object of a generator's output.
func outputObject(namespace, name string) source.Object {
	return source.Object{Kind: sourcev1.ExternalArtifactKind, Namespace: namespace, Name: name}
}

// errOwnershipConflict means an ExternalArtifact of the output's name
// exists and is not the generator's.
var errOwnershipConflict = errors.New("owned by another source")

// writeExternalArtifact applies the ExternalArtifact that points back at
// the generator, with its labels and annotations, then writes its
// artifact, exported inputs and Ready condition in one status patch.
func (r *Reconciler) writeExternalArtifact(ctx context.Context, gen *swv1beta1.ArtifactGenerator, o generatedOutput, art source.Artifact, inputs map[string]*apiextensionsv1.JSON) error {
	c := r.deps.Client
	current := &sourcev1.ExternalArtifact{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: o.Name}, current); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading ExternalArtifact %s/%s: %w", o.namespace, o.Name, err)
	case !generatedBy(current, gen):
		owner := "no sourceRef"
		if sr := current.Spec.SourceRef; sr != nil {
			owner = fmt.Sprintf("sourceRef %s/%s/%s", sr.Kind, sr.Namespace, sr.Name)
		}
		return fmt.Errorf("ExternalArtifact %s/%s is %w (%s)", o.namespace, o.Name, errOwnershipConflict, owner)
	}
	labels, annotations := map[string]string{}, map[string]string{}
	if cm := gen.Spec.CommonMetadata; cm != nil {
		maps.Copy(labels, cm.Labels)
		maps.Copy(annotations, cm.Annotations)
	}
	maps.Copy(labels, o.labels)
	// source-watcher's labels, which tools (Cozystack's operator among
	// them) read to find a generator's artifacts.
	labels["app.kubernetes.io/managed-by"] = sourceWatcherName
	labels[swv1beta1.ArtifactGeneratorLabel] = string(gen.UID)
	ea := &sourcev1.ExternalArtifact{
		TypeMeta:   metav1.TypeMeta{APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.ExternalArtifactKind},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.namespace, Labels: labels, Annotations: annotations},
		Spec: sourcev1.ExternalArtifactSpec{SourceRef: &meta.NamespacedObjectKindReference{
			APIVersion: swv1beta1.GroupVersion.String(), Kind: swv1beta1.ArtifactGeneratorKind, Name: gen.Name, Namespace: gen.Namespace,
		}},
	}
	if len(annotations) == 0 {
		ea.Annotations = nil
	}
	if err := c.Patch(ctx, ea, client.Apply, client.FieldOwner(r.opts.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying ExternalArtifact %s/%s: %w", o.namespace, o.Name, err)
	}
	orig := ea.DeepCopy()
	ea.Status.Artifact = frame.MetaArtifact(art)
	ea.Status.ExportedInputs = inputs
	conditions.MarkTrue(ea, meta.ReadyCondition, meta.SucceededReason, "Artifact revision %s", art.Revision)
	if err := c.Status().Patch(ctx, ea, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing ExternalArtifact %s/%s status: %w", o.namespace, o.Name, err)
	}
	return nil
}

// Kinds registers the ArtifactGenerator's reconciler and the rebuild of
// the ExternalArtifacts it writes.
func (r *Reconciler) Kinds() []frame.Registration {
	return []frame.Registration{
		{Kind: swv1beta1.ArtifactGeneratorKind, Reconciler: r},
		{Kind: sourcev1.ExternalArtifactKind, Rebuild: frame.RebuildAs(func(ctx context.Context, staging *source.Store, _ source.Object, ea *sourcev1.ExternalArtifact, _ string) (source.Artifact, error) {
			return r.Rebuild(ctx, staging, ea)
		})},
	}
}

// Rebuild composes an ArtifactGenerator's output again from the
// generator's sources, materialising those the store lacks, as the
// reconciler does, into staging. Deps.Slot bounds the rebuilds in flight.
func (r *Reconciler) Rebuild(ctx context.Context, staging *source.Store, ea *sourcev1.ExternalArtifact) (source.Artifact, error) {
	sr := ea.Spec.SourceRef
	if sr == nil || sr.Kind != swv1beta1.ArtifactGeneratorKind {
		return source.Artifact{}, errors.New("only the artifact of an ArtifactGenerator (spec.sourceRef) can be rebuilt")
	}
	genNamespace := sr.Namespace
	if genNamespace == "" {
		genNamespace = ea.Namespace
	}
	gen := &swv1beta1.ArtifactGenerator{}
	if err := r.deps.Client.Get(ctx, client.ObjectKey{Namespace: genNamespace, Name: sr.Name}, gen); err != nil {
		return source.Artifact{}, fmt.Errorf("reading %s/%s/%s: %w", swv1beta1.ArtifactGeneratorKind, genNamespace, sr.Name, err)
	}
	self := frame.Ref{Kind: swv1beta1.ArtifactGeneratorKind, Namespace: gen.Namespace, Name: gen.Name}
	sources, done, out, ok := r.generatorSources(ctx, gen, self)
	if !ok {
		if out.Waiting {
			return source.Artifact{}, &frame.WaitingError{Message: out.Message}
		}
		return source.Artifact{}, errors.New(out.Message)
	}
	defer done()
	outputs, err := generatorOutputs(gen, sources)
	if err != nil {
		return source.Artifact{}, fmt.Errorf("%s: %w", self, err)
	}
	i := slices.IndexFunc(outputs, func(o generatedOutput) bool { return o.Name == ea.Name && o.namespace == ea.Namespace })
	if i < 0 {
		return source.Artifact{}, fmt.Errorf("%s has no output %s/%s", self, ea.Namespace, ea.Name)
	}
	release, err := r.deps.Slot(ctx)
	if err != nil {
		return source.Artifact{}, err
	}
	defer release()
	return buildOutput(ctx, staging, sources, outputs[i], generate.BuildOptions{Memory: r.generatorMemory()})
}

// Extractions is the number of source extractions started, for the
// benchmark that compares shared and private trees.
func (r *Reconciler) Extractions() int64 { return r.extracts.extractions.Load() }
