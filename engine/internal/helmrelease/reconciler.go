package helmrelease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cozystack/cozy-aio/shard"
	"github.com/cozystack/cozy-aio/source"
	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/engine/internal/targets"
)

// helmReleaseReconciler admits HelmReleases (gate, dependsOn, chart
// source) on a controller worker and hands the Helm work to the tenant's
// shard: a long install never holds a controller worker, and one tenant's
// releases cannot starve another's.
// Options are the engine's options HelmReleases follow.
type Options struct {
	// Restricted refuses cross-namespace references.
	Restricted bool
	// TenantLabel, when set, names the label whose value is a release's
	// tenant (else its namespace).
	TenantLabel string
	// ProgressAfter is how long a Helm action runs, or a release waits in
	// its queue, before its status says so; negative: never.
	ProgressAfter time.Duration
	// Logger logs what the Helm work does.
	Logger logr.Logger
	// UpgradeHold is the hold policy of a release without the
	// frame.HoldAnnotation. Default (""): never.
	UpgradeHold frame.HoldPolicy
	// DisablePlans plans no install or upgrade (and so holds none).
	DisablePlans bool
}

// Deps is what HelmReleases use of the engine.
type Deps struct {
	// Client reads and writes through the engine's cache; APIReader reads
	// the API server directly.
	Client    client.Client
	APIReader client.Reader
	// Store keeps the chart artifacts.
	Store *source.Store
	// Finisher writes each reconcile's outcome; Admission admits a
	// release over the Graph.
	Finisher  *frame.Finisher
	Admission *frame.Admission
	Graph     *frame.Graph
	// Recorder records the Events; Logger is the engine's logger.
	Recorder recorder.EventRecorder
	Logger   func() logr.Logger
	// Targets are the clusters releases install to.
	Targets *targets.Targets
	// Pool runs the Helm work on the tenants' shards.
	Pool *shard.Pool
	// OwnsTenant tells whether a tenant's Helm work runs here; MayWrite
	// whether this engine may write an object's status now.
	OwnsTenant func(tenant string) bool
	MayWrite   func(ctx context.Context, kind string, obj client.Object) bool
	// SourceArtifact resolves the chart's source artifact.
	SourceArtifact func(ctx context.Context, self frame.Ref, kind, namespace, name string) (source.Artifact, frame.Outcome, bool)
	// ReadsConfigs records the ConfigMaps and Secrets a unit reads.
	ReadsConfigs func(self frame.Ref, obj client.Object)
	// Enqueue asks for a reconcile of a unit.
	Enqueue func(frame.Ref)
	// ServiceAccount returns the account a release is installed as.
	ServiceAccount func(name string) string
}

// Reconciler reconciles HelmReleases as helm-controller does, with the
// Helm work of each tenant on its shard of the pool.
type Reconciler struct {
	deps     Deps
	opts     Options
	work     helmWork
	progress progress
	plans    frame.Plans
}

// New returns the HelmRelease reconciler.
func New(d Deps, o Options) *Reconciler {
	r := &Reconciler{deps: d, opts: o}
	r.work.backoff = runtimectrl.GetDefaultRateLimiter()
	return r
}

// Kinds registers the reconciler of its kind.
func (r *Reconciler) Kinds() []frame.Registration {
	return []frame.Registration{{Kind: helmv2.HelmReleaseKind, Reconciler: r}}
}

func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &helmv2.HelmRelease{}
	if err := r.deps.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			// Gone: its tenant leaves the pool with its last release.
			gone := frame.Ref{Kind: helmv2.HelmReleaseKind, Namespace: req.Namespace, Name: req.Name}
			r.unweigh(gone)
			r.deps.ReadsConfigs(gone, nil)
			r.plans.Forget(gone)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	self := frame.Ref{Kind: helmv2.HelmReleaseKind, Namespace: obj.Namespace, Name: obj.Name}
	tenant := r.TenantOf(obj)
	if !obj.DeletionTimestamp.IsZero() {
		r.deps.Graph.Remove(self)
		r.deps.ReadsConfigs(self, nil)
		r.weigh(tenant, self, false)
		r.finalizerSent(obj, false)
		if controllerutil.ContainsFinalizer(obj, frame.Finalizer) {
			r.dispatchHelm(obj, self, r.uninstall)
		}
		return ctrl.Result{}, nil
	}
	// Every replica weighs every release the same way, so that all place
	// the tenants on the same shards; and each knows what it reads, for
	// the watched ConfigMaps and Secrets.
	r.weigh(tenant, self, true)
	r.deps.ReadsConfigs(self, obj)
	if !r.deps.OwnsTenant(tenant) {
		// Another replica owns the tenant's shard. Should this one come to
		// own it, the parked item brings the release back here.
		r.deps.Pool.Add(tenant, self.String(), func(context.Context) error {
			r.deps.Enqueue(self)
			return nil
		})
		return ctrl.Result{}, nil
	}
	if obj.Spec.Suspend {
		return ctrl.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(obj, frame.Finalizer) && !r.finalizerSent(obj, true) {
		patch := client.MergeFrom(obj.DeepCopy())
		controllerutil.AddFinalizer(obj, frame.Finalizer)
		if err := r.deps.Client.Patch(ctx, obj, patch); err != nil {
			r.finalizerSent(obj, false)
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	start := time.Now()
	orig := obj.DeepCopy()
	if out, ok := r.admit(ctx, obj, self); !ok {
		obj.Status.ObservedGeneration = obj.Generation
		obj.Status.LastHandledReconcileAt = frame.HandledRequest(obj)
		return r.deps.Finisher.Finish(ctx, helmv2.HelmReleaseKind, obj, orig, start, out,
			frame.Timing{Interval: obj.GetRequeueAfter(), Backoff: true})
	}
	r.dispatchHelm(obj, self, r.release)
	return ctrl.Result{}, nil
}

// admit runs the checks that need no Helm: unsupported fields, the gate,
// dependencies and the chart's source.
func (r *Reconciler) admit(ctx context.Context, obj *helmv2.HelmRelease, self frame.Ref) (frame.Outcome, bool) {
	if err := Unsupported(obj); err != nil {
		return frame.Stalled(frame.UnsupportedFieldReason, err), false
	}
	if _, err := frame.HoldOf(obj, r.opts.UpgradeHold); err != nil {
		return frame.Stalled(frame.InvalidHoldReason, fmt.Errorf("%s: %w", self, err)), false
	}
	kind, ns, name, ok := chartSourceOf(obj)
	if !ok {
		return frame.Stalled(meta.ArtifactFailedReason, fmt.Errorf("%s: spec.chartRef or spec.chart is required", self)), false
	}
	deps, err := frame.Dependencies(helmv2.HelmReleaseKind, obj, obj.Spec.DependsOn)
	if err != nil {
		return frame.Stalled(meta.DependencyNotReadyReason, err), false
	}
	if err := frame.CheckExpressions(obj); err != nil {
		return frame.Stalled(meta.InvalidCELExpressionReason, fmt.Errorf("%s: %w", self, err)), false
	}
	src := frame.SourceRefOf(self, kind, ns, name)
	if out, ok := r.deps.Admission.Admit(ctx, self, obj, deps, &src, frame.DependencyRequeue); !ok {
		return out, false
	}
	if out, ok := r.reconcileHelmChart(ctx, obj, self); !ok {
		return out, false
	}
	if _, out, ok := r.deps.SourceArtifact(ctx, self, kind, ns, name); !ok {
		return out, false
	}
	return frame.Outcome{}, true
}

// TenantOf returns a HelmRelease's tenant: the TenantLabel's value, else
// the namespace.
func (r *Reconciler) TenantOf(obj client.Object) string {
	if r.opts.TenantLabel != "" {
		if v := obj.GetLabels()[r.opts.TenantLabel]; v != "" {
			return v
		}
	}
	// The releases of one remote cluster are one tenant, so that a
	// cluster that is down holds at most its fair share of workers.
	if hr, ok := obj.(*helmv2.HelmRelease); ok && hr.Spec.KubeConfig != nil {
		return obj.GetNamespace() + "/" + targets.KubeConfigName(hr.Spec.KubeConfig)
	}
	return obj.GetNamespace()
}

// dispatchHelm queues the Helm work of a release on its tenant's shard.
// The pool runs one item per release at a time.
func (r *Reconciler) dispatchHelm(obj *helmv2.HelmRelease, self frame.Ref, work func(ctx context.Context, self frame.Ref) (time.Duration, error)) {
	r.progress.dispatched(self, time.Now())
	r.deps.Pool.Add(r.TenantOf(obj), self.String(), func(ctx context.Context) error {
		r.progress.started(self)
		after, err := work(ctx, self)
		if err == nil && after > 0 {
			r.enqueueAfter(self, after)
		}
		return err
	})
}

// release does the Helm work for one HelmRelease, on a shard worker. It
// reads the object afresh, so queued work always acts on the latest spec.
func (r *Reconciler) release(ctx context.Context, self frame.Ref) (time.Duration, error) {
	obj := &helmv2.HelmRelease{}
	if err := r.deps.Client.Get(ctx, client.ObjectKey{Namespace: self.Namespace, Name: self.Name}, obj); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	if obj.Spec.Suspend || !obj.DeletionTimestamp.IsZero() {
		return 0, nil
	}
	start := time.Now()
	orig := obj.DeepCopy()
	out := r.reconcileRelease(ctx, obj, self)
	if cause := context.Cause(ctx); errors.Is(cause, frame.ErrShardLost) || errors.Is(cause, frame.ErrHandedOff) {
		// This replica gave up the shard the action started on, and
		// cancelled it: no status from here, it could land after the new
		// owner's. The release is reconciled again: its tenant may have
		// moved to a shard this replica still owns while the action ran
		// (it then recovers its own pending revision at once); else the
		// reconcile leaves it to the owner.
		r.opts.Logger.Info("Helm action cancelled: its shard moved to another replica", "HelmRelease", self.String(), "cause", cause.Error())
		r.deps.Enqueue(self)
		return 0, nil
	}
	obj.Status.ObservedGeneration = obj.Generation
	obj.Status.LastHandledReconcileAt = frame.HandledRequest(obj)
	res, err := r.deps.Finisher.Finish(ctx, helmv2.HelmReleaseKind, obj, orig, start, out,
		frame.Timing{Interval: obj.GetRequeueAfter(), Backoff: true})
	// The work ran on a shard worker, outside the controller's workqueue:
	// the failure's backoff is kept here.
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: self.Namespace, Name: self.Name}}
	if res.Requeue { //nolint:staticcheck // finish's signal for "retry with backoff"
		return r.work.backoff.When(req), err
	}
	r.work.backoff.Forget(req)
	return res.RequeueAfter, err
}

func (r *Reconciler) reconcileRelease(ctx context.Context, obj *helmv2.HelmRelease, self frame.Ref) frame.Outcome {
	kind, ns, name, ok := chartSourceOf(obj)
	if !ok {
		return frame.Stalled(meta.ArtifactFailedReason, fmt.Errorf("%s: spec.chartRef or spec.chart is required", self))
	}
	if obj.Spec.Chart != nil {
		obj.Status.SetChart(obj.GetHelmChartTemplateReference())
	}
	art, out, ok := r.deps.SourceArtifact(ctx, self, kind, ns, name)
	if !ok {
		return out
	}
	values, err := r.values(ctx, obj, self)
	if err != nil {
		return frame.Failed("ValuesError", err)
	}
	mgr, remote, out, ok := r.deps.Targets.HelmManagerOf(ctx, obj, self)
	if !ok {
		return out
	}
	chartPath, cleanup, err := chartArchive(r.deps.Store.Path(art))
	if err != nil {
		return frame.Failed(meta.ArtifactFailedReason, fmt.Errorf("%s: chart artifact %s: %w", self, art.Revision, err))
	}
	defer cleanup()
	opts := reconcileOptions(obj, chartPath, values)
	opts.PostRender.Rendered = r.warnPostRenderers(obj, self)
	var stopProgress func()
	opts.Starting, stopProgress = r.actionProgress(ctx, obj, self)
	state := helmState(obj)
	if v, ok := obj.GetAnnotations()[helmv2.ResetRequestAnnotation]; ok && v != obj.Status.LastHandledResetAt {
		state = helm.State{}
		obj.Status.LastHandledResetAt = v
	}
	// A new generation resets the failure counts, as helm-controller's
	// MustResetFailures: a spec change that leaves the chart and values
	// alone (a timeout, disableTakeOwnership, the remediation) is tried
	// again. The chart and values are in the state's digest.
	if obj.Status.LastAttemptedGeneration != obj.Generation {
		state = helm.State{}
	}
	rel := helm.Release{
		Name: ReleaseName(obj), Namespace: obj.GetReleaseNamespace(),
		StorageNamespace: obj.GetStorageNamespace(), ServiceAccount: r.deps.ServiceAccount(obj.Spec.ServiceAccountName),
		ServiceAccountNamespace: obj.Namespace,
	}
	opts.Known = knownRevision(obj, rel)
	hold, err := frame.HoldOf(obj, r.opts.UpgradeHold)
	if err != nil {
		return frame.Stalled(frame.InvalidHoldReason, fmt.Errorf("%s: %w", self, err))
	}
	opts.Preview = r.preview(obj, self, hold)
	attempted := obj.Status.DeepCopy()
	opts.Adopt = adoption(obj, kind, art.Revision)
	opts.Chart.Revision = digestRevision(kind, art.Revision)
	obj.Status.LastAttemptedGeneration = obj.Generation
	obj.Status.StorageNamespace = rel.StorageNamespace
	// As helm-controller: the chart version attempted (with the source's
	// digest) and its OCI digest come with the Outcome (setHelmStatus).
	obj.Status.LastAttemptedConfigDigest = helm.ConfigDigest(values)
	obj.Status.LastAttemptedValuesChecksum = ""
	obj.Status.LastReleaseRevision = 0
	res, err := mgr.Reconcile(ctx, rel, opts, state)
	if errors.Is(err, helm.ErrRecordConflict) && ctx.Err() == nil {
		// Another holder wrote the release since this one read it (two
		// replicas ran it in a hand-off window): what it wrote is the
		// release now. Read it again and report that, rather than a
		// failure that could land after the other holder's outcome.
		res, err = mgr.Reconcile(ctx, rel, opts, state)
	}
	stopProgress()
	if out, held := r.markHeld(obj, self, hold, res); held {
		// Nothing ran: the status says what it said, but for the Held
		// condition; Ready keeps its value.
		attempted.Conditions = obj.Status.Conditions
		obj.Status = *attempted
		return out
	}
	err = targets.RemoteError(remote, err)
	r.logHelmSteps(self, rel, res, err)
	setHelmStatus(obj, res, rel)
	setTestCondition(obj, res, rel)
	stage := helmStepAction(res.Steps)
	if cve := (*helm.ChartVersionError)(nil); errors.As(err, &cve) {
		// helm-controller's words: the chart does not fit its source's
		// revision, and nothing was done.
		return frame.Failed(ChartMutateErrorReason, cve)
	}
	if err != nil {
		setReleaseFailed(obj, res, rel, err)
		setRemediated(obj, res, rel)
		if res.Next.Kind == helm.NextStalled {
			return retriesExceeded(obj, fmt.Errorf("%s: %s: %w", self, res.Next.Reason, err)).At(stage)
		}
		o := frame.Failed(meta.ReconciliationFailedReason, fmt.Errorf("%s: %w", self, err)).At(stage)
		o.RequeueAfter = res.Next.After
		if errors.Is(err, helm.ErrRecordConflict) && o.RequeueAfter <= 0 {
			// Another holder wrote the release since it was read (a shard
			// hand-off): read it again soon, not at the next interval.
			o.RequeueAfter = recordConflictRetry
		}
		if frame.APIUnavailable(err) && (o.RequeueAfter <= 0 || o.RequeueAfter > frame.APIUnavailableRetry) {
			// The API server did not answer (restarted, etcd stalled):
			// soon, not at the next interval (found by internal/chaos, seed 42).
			o.RequeueAfter = frame.APIUnavailableRetry
		}
		return o
	}
	switch res.Next.Kind {
	case helm.NextStalled:
		return retriesExceeded(obj, errors.New(stalledMessage(obj.Status.Conditions, self, res.Next))).At(stage)
	case helm.NextRetry:
		o := frame.Failed(meta.ProgressingWithRetryReason, fmt.Errorf("%s: %s", self, res.Next.Reason)).At(stage)
		o.RequeueAfter = res.Next.After
		return o
	}
	if res.Adopted {
		// What helm-controller last attempted, which its snapshot just
		// verified: its status stays as it wrote it.
		s := opts.Adopt.Snapshot
		obj.Status.LastAttemptedRevision, obj.Status.LastAttemptedRevisionDigest = s.ChartVersion, s.OCIDigest
		obj.Status.LastAttemptedConfigDigest = s.ConfigDigest
		return testSummary(obj, adoptedOutcome(obj, s))
	}
	return testSummary(obj, releasedOutcome(obj, res, rel)).At(stage)
}

// testSummary gives a ready release's Ready condition the words
// helm-controller's summary gives it: with spec.test.enable and test
// failures not ignored, a TestSuccess=True at least as recent as Released
// comes first, so Ready repeats "Helm test succeeded for release …".
func testSummary(obj *helmv2.HelmRelease, o frame.Outcome) frame.Outcome {
	if !o.Ready || !obj.GetTest().Enable || obj.GetTest().IgnoreFailures {
		return o
	}
	t := conditions.Get(obj, helmv2.TestSuccessCondition)
	if t == nil || t.Status != metav1.ConditionTrue {
		return o
	}
	if r := conditions.Get(obj, helmv2.ReleasedCondition); r != nil && t.ObservedGeneration < r.ObservedGeneration {
		return o
	}
	o.Reason, o.Message = t.Reason, t.Message
	return o
}

// retriesExceeded is the outcome of a release out of retries, as
// helm-controller writes it: Ready=False as its Released condition says
// (the action that failed, the release, the chart and the cause) and
// Stalled=True RetriesExceeded "Failed to <action> after <n> attempt(s)".
// Without a failed Released condition (a status write lost to a crash)
// Ready says err, which names the cause from the failed record.
func retriesExceeded(obj *helmv2.HelmRelease, err error) frame.Outcome {
	out := frame.Stalled(meta.ReconciliationFailedReason, err)
	if c := conditions.Get(obj, helmv2.ReleasedCondition); c != nil && c.Status == metav1.ConditionFalse &&
		(c.Reason == helmv2.InstallFailedReason || c.Reason == helmv2.UpgradeFailedReason) {
		out.Reason, out.Message = c.Reason, c.Message
	}
	a := obj.Status.LastAttemptedReleaseAction
	n := obj.Status.InstallFailures
	if a == helmv2.ReleaseActionUpgrade {
		n = obj.Status.UpgradeFailures
	}
	if a != "" && n > 0 {
		out.StalledReason, out.StalledMessage = "RetriesExceeded", fmt.Sprintf("Failed to %s after %d attempt(s)", a, n)
	}
	return out
}

// setReleaseFailed sets Released=False as helm-controller does when this
// reconcile's install or upgrade failed (not its test: TestSuccess says
// that): InstallFailed or UpgradeFailed, naming the release and the chart
// version attempted.
func setReleaseFailed(obj *helmv2.HelmRelease, res helm.Outcome, rel helm.Release, err error) {
	var te *helm.TestError
	if errors.As(err, &te) {
		return
	}
	for i := len(res.Steps) - 1; i >= 0; i-- {
		a := res.Steps[i].Action
		if a != helm.ActionInstall && a != helm.ActionUpgrade {
			continue
		}
		reason := helmv2.InstallFailedReason
		if a == helm.ActionUpgrade {
			reason = helmv2.UpgradeFailedReason
		}
		name, _ := splitChart(res.Steps[i].Chart)
		if h := obj.Status.History; len(h) > 0 && h[0] != nil && h[0].ChartName != "" {
			name = h[0].ChartName
		}
		conditions.MarkFalse(obj, helmv2.ReleasedCondition, reason, "Helm %s failed for release %s/%s with chart %s@%s: %s",
			a, rel.Namespace, rel.Name, name, obj.Status.LastAttemptedRevision, err.Error())
		return
	}
}

// setRemediated sets the Remediated condition as helm-controller does
// when a failed install, upgrade or test was remedied in this reconcile:
// True after a rollback to the previous release or an uninstall, False
// when the remedy failed. Unlike helm-controller's summary, which puts
// Remediated first, Ready keeps naming the failure that was remedied: a
// broken release says why on Ready.
func setRemediated(obj *helmv2.HelmRelease, res helm.Outcome, rel helm.Release) {
	if len(res.Steps) == 0 {
		return
	}
	st := res.Steps[len(res.Steps)-1]
	if st.Remedied == 0 || (st.Action != helm.ActionRollback && st.Action != helm.ActionUninstall) {
		return
	}
	name, version := splitChart(st.RemediedChart)
	release := fmt.Sprintf("%s/%s.v%d", rel.Namespace, rel.Name, st.Remedied)
	chart := name + "@" + version
	switch {
	case st.Action == helm.ActionRollback && st.Err == nil:
		conditions.MarkTrue(obj, helmv2.RemediatedCondition, helmv2.RollbackSucceededReason,
			"Helm rollback to previous release %s with chart %s succeeded", release, chart)
	case st.Action == helm.ActionRollback:
		conditions.MarkFalse(obj, helmv2.RemediatedCondition, helmv2.RollbackFailedReason,
			"Helm rollback to previous release %s with chart %s failed: %s", release, chart, strings.TrimSpace(st.Err.Error()))
	case st.Err == nil:
		conditions.MarkTrue(obj, helmv2.RemediatedCondition, helmv2.UninstallSucceededReason,
			"Helm uninstall remediation for release %s with chart %s succeeded", release, chart)
	default:
		conditions.MarkFalse(obj, helmv2.RemediatedCondition, helmv2.UninstallFailedReason,
			"Helm uninstall remediation for release %s with chart %s failed: %s", release, chart, strings.TrimSpace(st.Err.Error()))
	}
}

// ChartMutateErrorReason is helm-controller's Ready reason for a chart
// whose version cannot take its source's digest.
const ChartMutateErrorReason = "ChartMutateError"

// releasedOutcome is the Ready condition of a release in sync, as
// helm-controller's summarize gives it: the Released condition's reason
// and message. An install or upgrade sets Released=True with
// InstallSucceeded or UpgradeSucceeded for the revision it made. In sync
// with nothing done, a Released=True about the latest revision stands, so
// that a periodic check writes nothing; one about another revision (a
// rollback made the latest) or none (cozy-aio installed the release before
// it kept Released) is written for the latest revision, by the action
// Helm says made it.
func releasedOutcome(obj *helmv2.HelmRelease, res helm.Outcome, rel helm.Release) frame.Outcome {
	h := obj.Status.History
	if len(h) == 0 || h[0] == nil {
		name, version := splitChart(res.Release.Chart)
		return frame.Succeeded("Helm %s succeeded for release %s/%s.v%d with chart %s@%s", actionVerb(res), rel.Namespace, rel.Name,
			res.Release.Revision, name, version)
	}
	done := slices.ContainsFunc(res.Steps, func(s helm.Result) bool {
		return s.Action == helm.ActionInstall || s.Action == helm.ActionUpgrade
	})
	c := conditions.Get(obj, helmv2.ReleasedCondition)
	if !done && c != nil && c.Status == metav1.ConditionTrue && strings.HasSuffix(c.Message, releasedTarget(h[0])) {
		return frame.Outcome{Ready: true, Reason: c.Reason, Message: c.Message}
	}
	verb, reason := string(helm.ActionUpgrade), helmv2.UpgradeSucceededReason
	if actionVerb(res) == string(helm.ActionInstall) {
		verb, reason = string(helm.ActionInstall), helmv2.InstallSucceededReason
	}
	msg := releasedMessage(verb, h[0])
	conditions.MarkTrue(obj, helmv2.ReleasedCondition, reason, "%s", msg)
	conditions.Delete(obj, helmv2.RemediatedCondition)
	return frame.Outcome{Ready: true, Reason: reason, Message: msg}
}

// recordConflictRetry is how soon a release whose record another holder
// changed is reconciled again.
const recordConflictRetry = 2 * time.Second

// stalledMessage is the Ready message of a release whose retries were
// already exhausted. The failure that exhausted them wrote its cause after
// the same "<object>: <reason>" prefix; that message is kept, so a later
// reconcile (a source event, a restart) does not lose the cause.
//
// When that message was never written (the process stopped between the
// failed action and the status write, found by internal/chaos, seed 42),
// the cause comes from the newest failed revision's record (Next.Cause):
// Helm describes a failed revision with its error.
func stalledMessage(prev []metav1.Condition, self frame.Ref, next helm.Next) string {
	msg := fmt.Sprintf("%s: %s", self, next.Reason)
	if c := apimeta.FindStatusCondition(prev, meta.ReadyCondition); c != nil &&
		c.Status == metav1.ConditionFalse && strings.HasPrefix(c.Message, msg) {
		return c.Message
	}
	if next.Cause != "" {
		return msg + ": " + next.Cause
	}
	return msg
}

// uninstall removes a deleted HelmRelease's release, then its finalizer.
func (r *Reconciler) uninstall(ctx context.Context, self frame.Ref) (time.Duration, error) {
	obj := &helmv2.HelmRelease{}
	if err := r.deps.Client.Get(ctx, client.ObjectKey{Namespace: self.Namespace, Name: self.Name}, obj); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	if !obj.Spec.Suspend && releaseRecorded(obj) {
		c, err := r.deps.Targets.Registry.Get(ctx, obj.Namespace, obj.Spec.KubeConfig)
		if targets.KubeConfigGone(obj.Spec.KubeConfig, err) {
			// As helm-controller: without its kubeconfig the release
			// cannot be uninstalled; the finalizer goes, and the Event
			// says what may be left behind.
			r.deps.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, meta.ReconciliationFailedReason, string(helmv2.ActionHelmUninstall),
				"skipped the uninstall of release %s/%s: spec.kubeConfig %s is gone (%v); its objects may be left in the remote cluster",
				obj.GetReleaseNamespace(), ReleaseName(obj), targets.KubeConfigName(obj.Spec.KubeConfig), err)
			return 0, r.releaseFinalizer(ctx, obj, self)
		}
		if err != nil {
			return 0, r.uninstallFailed(ctx, obj, fmt.Errorf("%s: spec.kubeConfig: %w", self, err))
		}
		mgr, err := c.Value.Helm()
		if err != nil {
			return 0, r.uninstallFailed(ctx, obj, err)
		}
		rel := helm.Release{Name: ReleaseName(obj), Namespace: obj.GetReleaseNamespace(),
			StorageNamespace: obj.GetStorageNamespace(), ServiceAccount: r.deps.ServiceAccount(obj.Spec.ServiceAccountName),
			ServiceAccountNamespace: obj.Namespace}
		if _, err := mgr.Uninstall(ctx, rel, *uninstallOptions(obj)); err != nil {
			return 0, r.uninstallFailed(ctx, obj, fmt.Errorf("%s: uninstalling on deletion: %w", self, targets.RemoteError(c.Source, err)))
		}
	}
	return 0, r.releaseFinalizer(ctx, obj, self)
}

// uninstallFailed says on Ready why a deleted release is still there, as
// helm-controller's UninstallFailed, and returns err: the shard retries the
// uninstall with its backoff.
func (r *Reconciler) uninstallFailed(ctx context.Context, obj *helmv2.HelmRelease, err error) error {
	patch := client.MergeFrom(obj.DeepCopy())
	conditions.MarkFalse(obj, meta.ReadyCondition, helmv2.UninstallFailedReason, "failed to uninstall release: %s", err)
	if perr := r.deps.Client.Status().Patch(ctx, obj, patch); perr != nil && !apierrors.IsNotFound(perr) {
		r.opts.Logger.Error(perr, "writing the uninstall failure", "HelmRelease", obj.Namespace+"/"+obj.Name)
	}
	return err
}

// releaseRecorded tells whether a HelmRelease's status records a release
// that may exist: a storage namespace (set before any Helm action) or a
// history. As helm-controller, a release that records neither was never
// acted on, so its deletion needs no uninstall, and no cluster: a release
// of a tenant cluster that never came up is deleted at once.
func releaseRecorded(obj *helmv2.HelmRelease) bool {
	return obj.Status.StorageNamespace != "" || len(obj.Status.History) > 0
}

// releaseFinalizer deletes the HelmChart a deleted release owns, then
// removes the release's finalizer.
func (r *Reconciler) releaseFinalizer(ctx context.Context, obj *helmv2.HelmRelease, self frame.Ref) error {
	if err := r.deleteHelmChart(ctx, obj); err != nil {
		return fmt.Errorf("%s: %w", self, err)
	}
	patch := client.MergeFrom(obj.DeepCopy())
	controllerutil.RemoveFinalizer(obj, frame.Finalizer)
	if err := r.deps.Client.Patch(ctx, obj, patch); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
