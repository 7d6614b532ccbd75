// Package kinds is the engine's one description of each kind it knows:
// its Go and list types, what its status says, what it may depend on and
// be depended on by, how its controller retries, which ConfigMaps and
// Secrets it reads, and which Event action each outcome reports. The
// facade, the frame and the artifacts read this table instead of
// switching over the kinds; adding a kind touches its family (its
// reconciler, and its rebuild when it has an artifact) and this table.
//
// It imports the Flux APIs only: every room may read it.
package kinds

import (
	"reflect"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kind describes one kind the engine knows.
type Kind struct {
	// Name is the kind's name, as in an object's kind field.
	Name string
	// New returns an empty object of the kind; NewList an empty list.
	New     func() client.Object
	NewList func() client.ObjectList
	// Reconciled: the engine runs a reconciler of the kind (not
	// ExternalArtifact, which an ArtifactGenerator writes, and which units
	// read and wait on).
	Reconciled bool
	// Artifact: objects of the kind carry an artifact that units read, that
	// the artifact server answers for and that replicas mirror.
	Artifact bool
	// Dependable: the depends-on annotation may name the kind.
	Dependable bool
	// Backoff: its controller retries a failure with Flux's exponential
	// backoff (750 ms doubling to 15 min, reset by a success), as source-
	// and helm-controller do; without, controller-runtime's default for
	// the errors it returns (a Kustomization retries after its
	// spec.retryInterval, as kustomize-controller does).
	Backoff bool
	// Sharded: its reconciler runs on every replica, each for the objects
	// of the Helm shards it holds; the others run on the leader.
	Sharded bool
	// QuietMissingSource: a source that does not exist (yet) makes an
	// object of the kind Ready=False without an Event, as helm- and
	// kustomize-controller do; source-watcher and source-controller's
	// HelmChart record a Warning.
	QuietMissingSource bool
	// Status reads what the engine uses of an object's status.
	Status func(client.Object) Status
	// DependsOn returns spec.dependsOn, for the kinds whose dependencies
	// are of their own kind and may carry a readyExpr; nil for the others.
	DependsOn func(client.Object) []meta.DependencyReference
	// Configs returns the ConfigMaps and Secrets an object reads (what
	// helm- and kustomize-controller index for their config watches); nil
	// for the kinds that read none.
	Configs func(client.Object) []Config
	// Actions names the Event action of an outcome by its Ready reason,
	// Action for the other reasons (Flux 2.10's Action constants of each
	// API, so that Alerts and providers receive the same action).
	Actions map[string]string
	Action  string
	// intern shares the strings cached objects of the kind have in common
	// (CacheTransform).
	intern func(*interner, client.Object)
}

// Status is what the engine reads of an object's status.
type Status struct {
	// ObservedGeneration is status.observedGeneration.
	ObservedGeneration int64
	// Artifact is status.artifact, for the kinds that have one.
	Artifact *meta.Artifact
	// Revision is the revision the object last acted on: its artifact's,
	// or a Kustomization's or HelmRelease's last attempted revision.
	Revision string
}

// Config names a ConfigMap or Secret an object reads, in its namespace.
type Config struct {
	Kind, Name string
}

// The Event actions of Flux's APIs the table names.
var (
	reconcileAction       = string(kustomizev1.ActionReconcile)
	checkDependencies     = string(kustomizev1.ActionCheckDependencies)
	resolveSource         = string(kustomizev1.ActionResolveSource)
	healthCheck           = string(kustomizev1.ActionHealthCheck)
	sourceReconcileAction = string(sourcev1.ActionReconcile)
	applierActions        = map[string]string{meta.DependencyNotReadyReason: checkDependencies, meta.ArtifactFailedReason: resolveSource, meta.HealthCheckFailedReason: healthCheck}
	helmReleaseActions    = withAction(applierActions, "ValuesError", string(helmv2.ActionResolveValues))
	artifactGeneratorActs = map[string]string{meta.ArtifactFailedReason: resolveSource, meta.BuildFailedReason: string(swv1beta1.ActionBuild)}
)

func withAction(m map[string]string, reason, action string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	out[reason] = action
	return out
}

// artifactStatus reads a source kind's status.
func artifactStatus[T interface {
	client.Object
	GetArtifact() *meta.Artifact
}](observed func(T) int64) func(client.Object) Status {
	return func(o client.Object) Status {
		t := o.(T)
		s := Status{ObservedGeneration: observed(t), Artifact: t.GetArtifact()}
		if s.Artifact != nil {
			s.Revision = s.Artifact.Revision
		}
		return s
	}
}

// table is every kind the engine knows, in the order its controllers are
// set up.
var table = []Kind{
	{
		Name: sourcev1.GitRepositoryKind, Reconciled: true, Artifact: true, Dependable: true, Backoff: true,
		New:     func() client.Object { return &sourcev1.GitRepository{} },
		NewList: func() client.ObjectList { return &sourcev1.GitRepositoryList{} },
		Status:  artifactStatus(func(o *sourcev1.GitRepository) int64 { return o.Status.ObservedGeneration }),
		Action:  sourceReconcileAction,
	},
	{
		Name: sourcev1.OCIRepositoryKind, Reconciled: true, Artifact: true, Dependable: true, Backoff: true,
		New:     func() client.Object { return &sourcev1.OCIRepository{} },
		NewList: func() client.ObjectList { return &sourcev1.OCIRepositoryList{} },
		Status:  artifactStatus(func(o *sourcev1.OCIRepository) int64 { return o.Status.ObservedGeneration }),
		Action:  sourceReconcileAction,
	},
	{
		Name: sourcev1.BucketKind, Reconciled: true, Artifact: true, Backoff: true,
		New:     func() client.Object { return &sourcev1.Bucket{} },
		NewList: func() client.ObjectList { return &sourcev1.BucketList{} },
		Status:  artifactStatus(func(o *sourcev1.Bucket) int64 { return o.Status.ObservedGeneration }),
		Action:  sourceReconcileAction,
	},
	{
		// Its artifact is an index the HelmCharts read, not one units
		// read: not Artifact.
		Name: sourcev1.HelmRepositoryKind, Reconciled: true, Backoff: true,
		New:     func() client.Object { return &sourcev1.HelmRepository{} },
		NewList: func() client.ObjectList { return &sourcev1.HelmRepositoryList{} },
		Status:  artifactStatus(func(o *sourcev1.HelmRepository) int64 { return o.Status.ObservedGeneration }),
		Action:  sourceReconcileAction,
	},
	{
		Name: sourcev1.HelmChartKind, Reconciled: true, Artifact: true, Backoff: true,
		New:     func() client.Object { return &sourcev1.HelmChart{} },
		NewList: func() client.ObjectList { return &sourcev1.HelmChartList{} },
		Status:  artifactStatus(func(o *sourcev1.HelmChart) int64 { return o.Status.ObservedGeneration }),
		Action:  sourceReconcileAction,
		// One per HelmRelease that names its chart by spec.chart.
		intern: func(in *interner, o client.Object) { in.helmChart(o.(*sourcev1.HelmChart)) },
	},
	{
		Name: kustomizev1.KustomizationKind, Reconciled: true, Dependable: true, QuietMissingSource: true,
		New:     func() client.Object { return &kustomizev1.Kustomization{} },
		NewList: func() client.ObjectList { return &kustomizev1.KustomizationList{} },
		Status: func(o client.Object) Status {
			k := o.(*kustomizev1.Kustomization)
			return Status{ObservedGeneration: k.Status.ObservedGeneration, Revision: k.Status.LastAttemptedRevision}
		},
		DependsOn: func(o client.Object) []meta.DependencyReference { return o.(*kustomizev1.Kustomization).Spec.DependsOn },
		Configs:   kustomizationConfigs,
		Actions:   applierActions, Action: reconcileAction,
	},
	{
		Name: helmv2.HelmReleaseKind, Reconciled: true, Dependable: true, Backoff: true, Sharded: true, QuietMissingSource: true,
		New:     func() client.Object { return &helmv2.HelmRelease{} },
		NewList: func() client.ObjectList { return &helmv2.HelmReleaseList{} },
		Status: func(o client.Object) Status {
			hr := o.(*helmv2.HelmRelease)
			return Status{ObservedGeneration: hr.Status.ObservedGeneration, Revision: hr.Status.LastAttemptedRevision}
		},
		DependsOn: func(o client.Object) []meta.DependencyReference { return o.(*helmv2.HelmRelease).Spec.DependsOn },
		Configs:   helmReleaseConfigs,
		Actions:   helmReleaseActions, Action: reconcileAction,
		intern: func(in *interner, o client.Object) { in.helmRelease(o.(*helmv2.HelmRelease)) },
	},
	{
		Name: swv1beta1.ArtifactGeneratorKind, Reconciled: true, Dependable: true,
		New:     func() client.Object { return &swv1beta1.ArtifactGenerator{} },
		NewList: func() client.ObjectList { return &swv1beta1.ArtifactGeneratorList{} },
		// Its status has no observed generation, artifact or revision.
		Status:  func(client.Object) Status { return Status{} },
		Actions: artifactGeneratorActs, Action: reconcileAction,
	},
	{
		Name: sourcev1.ExternalArtifactKind, Artifact: true, Dependable: true,
		New:     func() client.Object { return &sourcev1.ExternalArtifact{} },
		NewList: func() client.ObjectList { return &sourcev1.ExternalArtifactList{} },
		Status:  artifactStatus(func(*sourcev1.ExternalArtifact) int64 { return 0 }),
		Action:  sourceReconcileAction,
	},
}

var (
	byName = map[string]*Kind{}
	byType = map[reflect.Type]*Kind{}
)

func init() {
	for i := range table {
		k := &table[i]
		byName[k.Name] = k
		byType[reflect.TypeOf(k.New())] = k
	}
}

// All returns every kind the engine knows, reconciled or not.
func All() []Kind { return table }

// Get returns the kind of this name.
func Get(name string) (Kind, bool) {
	k, ok := byName[name]
	if !ok {
		return Kind{}, false
	}
	return *k, true
}

// Of returns the kind of obj's Go type.
func Of(obj client.Object) (Kind, bool) {
	k, ok := byType[reflect.TypeOf(obj)]
	if !ok {
		return Kind{}, false
	}
	return *k, true
}

// Names returns the names of the kinds that match, in the table's order.
func Names(match func(Kind) bool) []string {
	var out []string
	for _, k := range table {
		if match(k) {
			out = append(out, k.Name)
		}
	}
	return out
}

// Revision returns the revision obj last acted on (Status.Revision); ""
// for a kind the table does not know.
func Revision(obj client.Object) string {
	if k, ok := Of(obj); ok && k.Status != nil {
		return k.Status(obj).Revision
	}
	return ""
}

// EventAction is the action of the Event that reports an outcome of
// reason for an object of kind: the reconcile's stage the reason comes
// from (a dependency cycle is reported as meta.DependencyNotReadyReason
// is), else the kind's Action; source-controller's reconcile for a kind
// the table does not know.
func EventAction(kind, reason string) string {
	k, ok := Get(kind)
	if !ok {
		return sourceReconcileAction
	}
	if a, ok := k.Actions[reason]; ok {
		return a
	}
	return k.Action
}

func helmReleaseConfigs(o client.Object) []Config {
	hr := o.(*helmv2.HelmRelease)
	var out []Config
	for _, ref := range hr.Spec.ValuesFrom {
		out = appendConfig(out, ref.Kind, ref.Name)
	}
	return appendKubeConfig(out, hr.Spec.KubeConfig)
}

func kustomizationConfigs(o client.Object) []Config {
	ks := o.(*kustomizev1.Kustomization)
	var out []Config
	if pb := ks.Spec.PostBuild; pb != nil {
		for _, ref := range pb.SubstituteFrom {
			out = appendConfig(out, ref.Kind, ref.Name)
		}
	}
	if d := ks.Spec.Decryption; d != nil && d.SecretRef != nil {
		out = appendConfig(out, "Secret", d.SecretRef.Name)
	}
	return appendKubeConfig(out, ks.Spec.KubeConfig)
}

// appendConfig appends a reference of kind ConfigMap or Secret.
func appendConfig(out []Config, kind, name string) []Config {
	if kind == "ConfigMap" || kind == "Secret" {
		out = append(out, Config{Kind: kind, Name: name})
	}
	return out
}

func appendKubeConfig(out []Config, kc *meta.KubeConfigReference) []Config {
	if kc == nil {
		return out
	}
	if kc.ConfigMapRef != nil {
		out = appendConfig(out, "ConfigMap", kc.ConfigMapRef.Name)
	}
	if kc.SecretRef != nil {
		out = appendConfig(out, "Secret", kc.SecretRef.Name)
	}
	return out
}
