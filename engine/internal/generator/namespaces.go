package generator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/runtime/cel"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	celtypes "github.com/google/cel-go/cel"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/generate"
)

// reservedNamespaces are never managed, whatever allowedNames says.
var reservedNamespaces = []string{"default", "kube-system", "kube-public", "flux-system"}

// namespaceError is a spec.managedNamespaces failure; stalled when only a
// spec change can mend it.
type namespaceError struct {
	reason  string
	stalled bool
	err     error
}

func (e *namespaceError) Error() string { return e.err.Error() }

func nsStalled(format string, args ...any) *namespaceError {
	return &namespaceError{reason: swv1beta1.ValidationFailedReason, stalled: true, err: fmt.Errorf(format, args...)}
}

func (e *namespaceError) outcome(self frame.Ref) frame.Outcome {
	err := fmt.Errorf("%s: spec.managedNamespaces: %w", self, e.err)
	if e.stalled {
		return frame.Stalled(e.reason, err)
	}
	return frame.Failed(e.reason, err).At(string(swv1beta1.ActionPublish))
}

// namespaceAccount is the ServiceAccount that authorizes a generator's
// namespace management: spec.serviceAccountName, else in restricted mode
// the default account; "" when there is none.
func (r *Reconciler) namespaceAccount(gen *swv1beta1.ArtifactGenerator) string {
	if gen.Spec.ServiceAccountName != "" {
		return gen.Spec.ServiceAccountName
	}
	if r.opts.Restricted {
		return r.opts.DefaultServiceAccount
	}
	return ""
}

// managedTargets lists, in order, the namespaces the outputs name
// explicitly, but the generator's own, which is never managed.
func managedTargets(gen *swv1beta1.ArtifactGenerator, outs []generatedOutput) []generatedOutput {
	var targets []generatedOutput
	for _, o := range outs {
		if o.Namespace == "" || o.namespace == gen.Namespace || slices.ContainsFunc(targets, func(t generatedOutput) bool { return t.namespace == o.namespace }) {
			continue
		}
		targets = append(targets, o)
	}
	return targets
}

// reconcileNamespaces creates or updates, as source-watcher does with
// spec.managedNamespaces, the namespaces the outputs target: each must be
// allowed by an allowedNames expression and not reserved, and the
// generator's ServiceAccount must be allowed to manage it; the engine
// then applies it with its own identity, with the metadata the spec
// builds and the generator's labels. arts holds the built artifact of
// each output, for metadata read from "@artifact/…".
func (r *Reconciler) reconcileNamespaces(ctx context.Context, gen *swv1beta1.ArtifactGenerator, outs []generatedOutput,
	arts map[string]source.Artifact, sources map[string]generate.Source) ([]swv1beta1.InventoryEntry, error) {
	mn := gen.Spec.ManagedNamespaces
	sa := r.namespaceAccount(gen)
	if sa == "" {
		return nil, nsStalled("managing namespaces needs a ServiceAccount to authorize it: set spec.serviceAccountName")
	}
	var allowed []*cel.Expression
	for _, expr := range mn.AllowedNames {
		x, err := cel.NewExpression(expr, cel.WithCompile(), cel.WithOutputType(celtypes.BoolType), cel.WithStringVariables("ns"))
		if err != nil {
			return nil, nsStalled("allowedNames %q: %w", expr, err)
		}
		allowed = append(allowed, x)
	}
	var entries []swv1beta1.InventoryEntry
	for _, o := range managedTargets(gen, outs) {
		name := o.namespace
		if slices.Contains(reservedNamespaces, name) {
			return nil, nsStalled("namespace %s is reserved and never managed", name)
		}
		ok := false
		for _, x := range allowed {
			if v, err := x.EvaluateBoolean(ctx, map[string]any{"ns": name}); err == nil && v {
				ok = true
				break
			}
		}
		if !ok {
			return nil, nsStalled("namespace %s is not allowed by any of allowedNames", name)
		}
		verbs := []string{"create", "update"}
		if mn.Prune {
			verbs = append(verbs, "delete")
		}
		if err := r.accessReview(ctx, gen.Namespace, sa, authorizationv1.ResourceAttributes{Resource: "namespaces", Name: name}, verbs); err != nil {
			return nil, &namespaceError{reason: swv1beta1.AccessDeniedReason, err: err}
		}
		labels, annotations, err := r.namespaceMetadata(ctx, gen, o, arts[o.namespace+"/"+o.Name], sources)
		if err != nil {
			return nil, &namespaceError{reason: swv1beta1.ValidationFailedReason, err: fmt.Errorf("namespace %s: %w", name, err)}
		}
		if err := r.applyNamespace(ctx, gen, name, labels, annotations); err != nil {
			return nil, &namespaceError{reason: "ReconciliationFailed", err: err}
		}
		entries = append(entries, swv1beta1.InventoryEntry{Kind: swv1beta1.NamespaceKind, Name: name, Digest: metadataDigest(labels, annotations)})
	}
	return entries, nil
}

// applyNamespace server-side applies a managed namespace, unless the
// namespace opts out as kustomize-controller's objects do (reconcile
// disabled, ssa Ignore, or ssa IfNotPresent once it exists). Taking over a
// namespace no generator manages (source-watcher: adopting), or another generator's,
// records a Warning Event on the namespace.
func (r *Reconciler) applyNamespace(ctx context.Context, gen *swv1beta1.ArtifactGenerator, name string, labels, annotations map[string]string) error {
	c := r.deps.Client
	existing := &corev1.Namespace{}
	err := c.Get(ctx, client.ObjectKey{Name: name}, existing)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading namespace %s: %w", name, err)
	default:
		if namespaceOptsOut(existing, true) {
			return nil
		}
		switch owner := existing.Labels[swv1beta1.ArtifactGeneratorLabel]; owner {
		case string(gen.UID):
		case "":
			r.deps.Recorder.Eventf(existing, nil, corev1.EventTypeWarning, swv1beta1.AdoptedReason, string(swv1beta1.ActionPublish),
				"Namespace %s is not managed by any ArtifactGenerator and is being adopted by %s/%s", name, gen.Namespace, gen.Name)
		default:
			r.deps.Recorder.Eventf(existing, nil, corev1.EventTypeWarning, swv1beta1.OwnershipConflictReason, string(swv1beta1.ActionPublish),
				"Namespace %s is managed by ArtifactGenerator %s and is being taken over by %s/%s", name, owner, gen.Namespace, gen.Name)
		}
	}
	ns := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
	}
	if err := c.Patch(ctx, ns, client.Apply, client.FieldOwner(r.opts.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying namespace %s: %w", name, err)
	}
	return nil
}

// namespaceOptsOut reports whether a namespace's metadata keeps the
// engine's hands off it: source.extensions.fluxcd.io/reconcile disabled or
// source.extensions.fluxcd.io/ssa Ignore, and for an apply also ssa
// IfNotPresent.
func namespaceOptsOut(ns *corev1.Namespace, applying bool) bool {
	for _, m := range []map[string]string{ns.Labels, ns.Annotations} {
		if strings.EqualFold(m[swv1beta1.ReconcileAnnotation], swv1beta1.DisabledValue) ||
			strings.EqualFold(m[swv1beta1.SSAAnnotation], swv1beta1.IgnoreValue) ||
			applying && strings.EqualFold(m[swv1beta1.SSAAnnotation], swv1beta1.IfNotPresentValue) {
			return true
		}
	}
	return false
}

// pruneNamespaces deletes the managed namespaces of old that keep is
// without, when spec.managedNamespaces.prune is set (or the generator is
// gone with prune set), and only those that are still the generator's.
func (r *Reconciler) pruneNamespaces(ctx context.Context, gen *swv1beta1.ArtifactGenerator, old, keep []swv1beta1.InventoryEntry) error {
	if !gen.NamespacePrune() {
		return nil
	}
	c := r.deps.Client
	for _, ref := range old {
		if ref.Kind != swv1beta1.NamespaceKind || slices.ContainsFunc(keep, func(k swv1beta1.InventoryEntry) bool {
			return k.Kind == swv1beta1.NamespaceKind && k.Name == ref.Name
		}) {
			continue
		}
		ns := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: ref.Name}, ns); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("reading namespace %s: %w", ref.Name, err)
		}
		if ns.Labels[swv1beta1.ArtifactGeneratorLabel] != string(gen.UID) || namespaceOptsOut(ns, false) || !ns.DeletionTimestamp.IsZero() {
			continue
		}
		if err := c.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting namespace %s: %w", ref.Name, err)
		}
	}
	return nil
}

// accessReview checks with SubjectAccessReviews that the ServiceAccount
// namespace/name may do each verb on the resource.
func (r *Reconciler) accessReview(ctx context.Context, namespace, name string, attrs authorizationv1.ResourceAttributes, verbs []string) error {
	for _, verb := range verbs {
		a := attrs
		a.Verb = verb
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + namespace + ":" + name,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &a,
		}}
		if err := r.deps.Client.Create(ctx, review); err != nil {
			return fmt.Errorf("checking ServiceAccount %s/%s's access: %w", namespace, name, err)
		}
		if !review.Status.Allowed {
			where := "namespace " + a.Namespace
			if a.Namespace == "" {
				where = "the cluster"
			}
			what := a.Resource
			if a.Name != "" {
				what += " " + a.Name
			}
			return fmt.Errorf("ServiceAccount %s/%s may not %s %s in %s", namespace, name, verb, what, where)
		}
	}
	return nil
}

// namespaceMetadata builds a managed namespace's labels and annotations
// as source-watcher documents it: spec.commonMetadata, then what the
// NamespaceMetadata file of metadata.fromSource sets within its allowed
// keys, then each metadata.from operation for that namespace (or "*") in
// order, then the generator's own labels, which nothing overrides. o is
// the first output that targets the namespace: its captures render the
// file's path, and "@artifact/…" reads its artifact.
func (r *Reconciler) namespaceMetadata(ctx context.Context, gen *swv1beta1.ArtifactGenerator, o generatedOutput, art source.Artifact, sources map[string]generate.Source) (map[string]string, map[string]string, error) {
	labels, annotations := map[string]string{}, map[string]string{}
	if cm := gen.Spec.CommonMetadata; cm != nil {
		maps.Copy(labels, cm.Labels)
		maps.Copy(annotations, cm.Annotations)
	}
	md := gen.Spec.ManagedNamespaces.Metadata
	if md != nil && md.FromSource != nil {
		l, a, err := r.sourcedNamespaceMetadata(ctx, md.FromSource, o, art, sources)
		if err != nil {
			return nil, nil, err
		}
		maps.Copy(labels, l)
		maps.Copy(annotations, a)
	}
	if md != nil {
		for _, op := range md.From {
			if op.Namespace != "*" && op.Namespace != o.namespace {
				continue
			}
			switch op.Strategy {
			case swv1beta1.NamespaceMetadataResetStrategy:
				labels, annotations = maps.Clone(op.Labels), maps.Clone(op.Annotations)
				if labels == nil {
					labels = map[string]string{}
				}
				if annotations == nil {
					annotations = map[string]string{}
				}
			case swv1beta1.OverrideStrategy:
				maps.Copy(labels, op.Labels)
				maps.Copy(annotations, op.Annotations)
			default: // Merge: only the keys not set yet.
				for k, v := range op.Labels {
					if _, ok := labels[k]; !ok {
						labels[k] = v
					}
				}
				for k, v := range op.Annotations {
					if _, ok := annotations[k]; !ok {
						annotations[k] = v
					}
				}
			}
		}
	}
	labels["app.kubernetes.io/managed-by"] = sourceWatcherName
	labels[swv1beta1.ArtifactGeneratorLabel] = string(gen.UID)
	if len(annotations) == 0 {
		annotations = nil
	}
	return labels, annotations, nil
}

// sourcedNamespaceMetadata reads a NamespaceMetadata file and keeps the
// labels and annotations its allowed schema names, each value checked by
// its CEL expression over "value".
func (r *Reconciler) sourcedNamespaceMetadata(ctx context.Context, from *swv1beta1.NamespaceMetadataFromSource, o generatedOutput, art source.Artifact, sources map[string]generate.Source) (map[string]string, map[string]string, error) {
	p, err := generate.Render(from.Path, o.raw)
	if err != nil {
		return nil, nil, fmt.Errorf("metadata.fromSource.path: %w", err)
	}
	data, err := r.readGeneratorFile(ctx, sources, art, p)
	if err != nil {
		return nil, nil, fmt.Errorf("metadata.fromSource.path %s: %w", p, err)
	}
	var nm swv1beta1.NamespaceMetadata
	if err := yaml.UnmarshalStrict(data, &nm); err != nil {
		return nil, nil, fmt.Errorf("metadata.fromSource.path %s: parsing NamespaceMetadata: %w", p, err)
	}
	if nm.APIVersion != "" && nm.APIVersion != swv1beta1.GroupVersion.String() || nm.Kind != "" && nm.Kind != swv1beta1.NamespaceMetadataKind {
		return nil, nil, fmt.Errorf("metadata.fromSource.path %s: %s %s is not a %s/%s", p, nm.APIVersion, nm.Kind, swv1beta1.GroupVersion, swv1beta1.NamespaceMetadataKind)
	}
	labels, err := allowedMetadata(ctx, nm.Metadata.Labels, from.AllowedLabels, "label")
	if err != nil {
		return nil, nil, fmt.Errorf("metadata.fromSource.path %s: %w", p, err)
	}
	annotations, err := allowedMetadata(ctx, nm.Metadata.Annotations, from.AllowedAnnotations, "annotation")
	if err != nil {
		return nil, nil, fmt.Errorf("metadata.fromSource.path %s: %w", p, err)
	}
	return labels, annotations, nil
}

// allowedMetadata keeps the entries of values whose key the schema names
// (the others are ignored); a value its expression refuses is an error.
func allowedMetadata(ctx context.Context, values, schema map[string]string, what string) (map[string]string, error) {
	out := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(values)) {
		expr, ok := schema[k]
		if !ok {
			continue
		}
		x, err := cel.NewExpression(expr, cel.WithCompile(), cel.WithOutputType(celtypes.BoolType), cel.WithStringVariables("value"))
		if err != nil {
			return nil, fmt.Errorf("allowed %s %s: expression %q: %w", what, k, expr, err)
		}
		ok, err = x.EvaluateBoolean(ctx, map[string]any{"value": values[k]})
		if err != nil {
			return nil, fmt.Errorf("allowed %s %s: expression %q: %w", what, k, expr, err)
		}
		if !ok {
			return nil, fmt.Errorf("%s %s=%q is refused by its allowed expression %q", what, k, values[k], expr)
		}
		out[k] = values[k]
	}
	return out, nil
}

// readGeneratorFile reads "@<alias>/<path>" from a source of the
// generator, or "@artifact/<path>" from the output's artifact, up to
// maxInputsSize bytes.
func (r *Reconciler) readGeneratorFile(ctx context.Context, sources map[string]generate.Source, art source.Artifact, ref string) ([]byte, error) {
	alias, rel, ok := strings.Cut(strings.TrimPrefix(ref, "@"), "/")
	rel = path.Clean(rel)
	if !ok || !strings.HasPrefix(ref, "@") || rel == "." || !fs.ValidPath(rel) {
		return nil, fmt.Errorf("the path must be @<alias>/<path> within the source")
	}
	var fsys fs.FS
	if alias == swv1beta1.ArtifactAlias {
		tree, release, err := r.extracts.acquire(ctx, art)
		if err != nil {
			return nil, fmt.Errorf("extracting the generated artifact: %w", err)
		}
		defer release()
		fsys = tree
	} else {
		src, ok := sources[alias]
		if !ok || src.FS == nil {
			return nil, fmt.Errorf("%w: %q", generate.ErrUnknownAlias, alias)
		}
		fsys = src.FS
	}
	f, err := fsys.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxInputsSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxInputsSize {
		return nil, fmt.Errorf("the file is larger than %d bytes", maxInputsSize)
	}
	return data, nil
}

// metadataDigest is the inventory digest of a managed namespace: the
// SHA-256 of its labels and annotations.
func metadataDigest(labels, annotations map[string]string) string {
	b, _ := json.Marshal(struct {
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}{labels, annotations})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
