package helmrelease

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/chartutil"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/go-logr/logr"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kusttypes "sigs.k8s.io/kustomize/api/types"

	"github.com/cozystack/cozy-aio/apply"
	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine/internal/frame"
)

func Unsupported(obj *helmv2.HelmRelease) error {
	in, up := obj.GetInstall(), obj.GetUpgrade()
	var tpl helmv2.HelmChartTemplate
	if obj.Spec.Chart != nil {
		tpl = *obj.Spec.Chart
	}
	// spec.chart.spec inlines an OCIRepository's spec: for kind
	// OCIRepository the generated OCIRepository is reconciled as any other
	// (a cloud provider, a service account, keyless and Notation
	// verification are not honoured there either); a HelmChart template
	// honours only its own fields (and interval, and verify with cosign
	// keys), and the CRD refuses the others with it.
	ts := tpl.Spec.OCIRepositorySpec
	oci := tpl.Kind == sourcev1.OCIRepositoryKind
	return frame.Unsupported(helmv2.HelmReleaseKind,
		frame.FieldCheck{Path: "spec.chart.kind (other than HelmChart or OCIRepository)", Set: tpl.Kind != "" && tpl.Kind != sourcev1.HelmChartKind && !oci},
		frame.FieldCheck{Path: "spec.chart.spec.verify without secretRef (keyless cosign)", Set: ts.Verify != nil && ts.Verify.SecretRef == nil && ts.Verify.Provider != "notation"},
		frame.FieldCheck{Path: "spec.chart.spec.verify.trustedRootSecretRef", Set: ts.Verify != nil && ts.Verify.TrustedRootSecretRef != nil},
		frame.FieldCheck{Path: "spec.chart.spec.provider", Set: ts.Provider != "" && (!oci || ts.Provider != sourcev1.GenericOCIProvider)},
		frame.FieldCheck{Path: "spec.chart.spec.serviceAccountName", Set: ts.ServiceAccountName != ""},
		frame.FieldCheck{Path: "spec.chart.spec.url", Set: !oci && ts.URL != ""},
		frame.FieldCheck{Path: "spec.chart.spec.ref", Set: !oci && ts.Reference != nil},
		frame.FieldCheck{Path: "spec.chart.spec.layerSelector", Set: !oci && ts.LayerSelector != nil},
		frame.FieldCheck{Path: "spec.chart.spec.secretRef", Set: !oci && ts.SecretRef != nil},
		frame.FieldCheck{Path: "spec.chart.spec.certSecretRef", Set: !oci && ts.CertSecretRef != nil},
		frame.FieldCheck{Path: "spec.chart.spec.proxySecretRef", Set: !oci && ts.ProxySecretRef != nil},
		frame.FieldCheck{Path: "spec.chart.spec.timeout", Set: !oci && ts.Timeout != nil},
		frame.FieldCheck{Path: "spec.chart.spec.ignore", Set: !oci && ts.Ignore != nil},
		frame.FieldCheck{Path: "spec.chart.spec.insecure", Set: !oci && ts.Insecure},
		frame.FieldCheck{Path: "spec.chart.spec.suspend", Set: !oci && ts.Suspend},
		// Helm 4's rollback has no --recreate-pods.
		frame.FieldCheck{Path: "spec.rollback.recreate", Set: obj.Spec.Rollback != nil && obj.Spec.Rollback.Recreate},
		frame.FieldCheck{Path: "spec.rollback.serverSideApply: disabled", Set: obj.Spec.Rollback != nil && obj.Spec.Rollback.ServerSideApply == helmv2.ServerSideApplyDisabled},
		frame.FieldCheck{Path: "spec.waitStrategy (other than poller or legacy)", Set: obj.Spec.WaitStrategy != nil && obj.Spec.WaitStrategy.Name != "" &&
			obj.Spec.WaitStrategy.Name != helmv2.WaitStrategyPoller && obj.Spec.WaitStrategy.Name != helmv2.WaitStrategyLegacy},
		frame.FieldCheck{Path: "spec.install.serverSideApply: false", Set: in.ServerSideApply != nil && !*in.ServerSideApply},
		frame.FieldCheck{Path: "spec.upgrade.serverSideApply: disabled", Set: up.ServerSideApply == helmv2.ServerSideApplyDisabled},
		frame.FieldCheck{Path: "spec.upgrade.chartNameChangeStrategy", Set: up.ChartNameChangeStrategy != ""},
		// cozy-aio runs no post-renderer (not even Flux's origin labels),
		// so only the default strategy means the same.
		frame.FieldCheck{Path: "spec.postRenderStrategy (other than combined)", Set: obj.Spec.PostRenderStrategy != "" &&
			obj.Spec.PostRenderStrategy != helmv2.PostRenderStrategyCombined},
	)
}

// values merges valuesFrom (in order, with targetPath and literal) and then
// spec.values with Flux's own fluxcd/pkg/chartutil, so the result is the
// one helm-controller computes.
func (r *Reconciler) values(ctx context.Context, obj *helmv2.HelmRelease, self frame.Ref) (map[string]any, error) {
	v, err := chartutil.ChartValuesFromReferences(ctx, logr.Discard(), r.deps.Client, obj.Namespace, obj.GetValues(), obj.Spec.ValuesFrom...)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", self, valuesRefOf(obj, err), err)
	}
	return v, nil
}

// valuesRefOf names the spec.valuesFrom entry a chartutil error is about:
// its index, kind and object, and its targetPath when set.
func valuesRefOf(obj *helmv2.HelmRelease, err error) string {
	var ve *chartutil.ErrValuesReference
	if !errors.As(err, &ve) {
		return "spec.valuesFrom"
	}
	for i, ref := range obj.Spec.ValuesFrom {
		if ref.Kind != ve.Kind || ref.Name != ve.Name.Name || ref.GetValuesKey() != ve.Key {
			continue
		}
		s := fmt.Sprintf("spec.valuesFrom[%d] %s %s", i, ref.Kind, ve.Name)
		if ref.TargetPath != "" {
			s += fmt.Sprintf(" targetPath %q", ref.TargetPath)
		}
		return s
	}
	return fmt.Sprintf("spec.valuesFrom %s %s", ve.Kind, ve.Name)
}

// helmOptions maps a HelmRelease's spec onto apply/helm's options.
func reconcileOptions(obj *helmv2.HelmRelease, chartPath string, values map[string]any) helm.ReconcileOptions {
	in, up := obj.GetInstall(), obj.GetUpgrade()
	timeout := obj.GetTimeout()
	wait := waitOf(obj, in.DisableWait)
	// Compiled by checkExpressions in admit already: no error here.
	checker, _ := frame.HealthChecker(obj.Spec.HealthCheckExprs)
	o := helm.ReconcileOptions{
		Spec: helm.Spec{
			Chart:                   helm.Chart{Path: chartPath},
			Values:                  []map[string]any{values},
			Timeout:                 in.GetTimeout(timeout).Duration,
			Wait:                    wait,
			WaitForJobs:             !in.DisableWaitForJobs,
			DisableHooks:            in.DisableHooks,
			DisableSchemaValidation: in.DisableSchemaValidation,
			MaxHistory:              obj.GetMaxHistory(),
			PostRender:              postRender(obj),
			HealthChecker:           checker,
		},
		InstallCRDs:     crdPolicy(in.CRDs, in.SkipCRDs, helm.CRDCreate),
		UpgradeCRDs:     crdPolicy(up.CRDs, false, helm.CRDSkip),
		CreateNamespace: in.CreateNamespace,
		// helm-controller adopts existing objects unless told not to.
		InstallDisableTakeOwnership: in.DisableTakeOwnership,
		UpgradeDisableTakeOwnership: up.DisableTakeOwnership,
		CleanupOnFail:               up.CleanupOnFail,
		Force:                       up.Force,
		PreserveValues:              up.PreserveValues,
		Rollback:                    rollbackOptions(obj),
		Install:                     installRemediation(in),
		Upgrade:                     upgradeRemediation(up),
		Test:                        testOptions(obj),
		UpgradeSettings:             upgradeSettings(obj),
		Uninstall:                   uninstallOptions(obj),
	}
	for _, r := range obj.GetDriftDetection().Ignore {
		o.DriftIgnore = append(o.DriftIgnore, frame.IgnoreRule(r.Paths, r.Target))
	}
	switch obj.GetDriftDetection().Mode {
	case helmv2.DriftDetectionEnabled:
		o.Drift = helm.DriftCorrect
	case helmv2.DriftDetectionWarn:
		o.Drift = helm.DriftDetect
	}
	return o
}

// waitOf is how an action waits: not at all with its disableWait set,
// else by spec.waitStrategy, poller (the default) with kstatus and the
// healthCheckExprs, legacy with Helm 3's readiness rules, as
// helm-controller does.
func waitOf(obj *helmv2.HelmRelease, disabled bool) helm.Wait {
	switch {
	case disabled:
		return helm.WaitNone
	case obj.GetWaitStrategy() == helmv2.WaitStrategyLegacy:
		return helm.WaitLegacy
	}
	return helm.WaitKStatus
}

// uninstallOptions are spec.uninstall's settings, for the uninstalls
// that remedy a failure as for the one on deletion (helm-controller's
// uninstall action reads them in both).
func uninstallOptions(obj *helmv2.HelmRelease) *helm.UninstallOptions {
	un := obj.GetUninstall()
	wait := waitOf(obj, un.DisableWait)
	return &helm.UninstallOptions{Timeout: un.GetTimeout(obj.GetTimeout()).Duration, Wait: wait,
		DisableHooks: un.DisableHooks, KeepHistory: un.KeepHistory, DeletionPropagation: un.GetDeletionPropagation()}
}

// upgradeSettings are spec.upgrade's own timeout, waits, hooks and
// schema check, as helm-controller sets them on its upgrade action.
func upgradeSettings(obj *helmv2.HelmRelease) *helm.ActionSettings {
	up := obj.GetUpgrade()
	wait := waitOf(obj, up.DisableWait)
	return &helm.ActionSettings{
		Timeout: up.GetTimeout(obj.GetTimeout()).Duration, Wait: wait, WaitForJobs: !up.DisableWaitForJobs,
		DisableHooks: up.DisableHooks, DisableSchemaValidation: up.DisableSchemaValidation,
	}
}

func crdPolicy(p helmv2.CRDsPolicy, skip bool, def helm.CRDPolicy) helm.CRDPolicy {
	switch {
	case p == helmv2.Skip || (p == "" && skip):
		return helm.CRDSkip
	case p == helmv2.Create:
		return helm.CRDCreate
	case p == helmv2.CreateReplace:
		return helm.CRDCreateReplace
	}
	return def
}

// retryIgnoresTests is IgnoreTestFailures under RetryOnFailure:
// helm-controller has no active remediation then, and a failed test
// neither counts nor fails the release (it only sets TestSuccess=False).
func retryIgnoresTests() *bool {
	yes := true
	return &yes
}

func installRemediation(in helmv2.Install) helm.Remediation {
	if in.Strategy != nil && in.Strategy.Name == string(helmv2.ActionStrategyRetryOnFailure) {
		return helm.Remediation{Strategy: helm.RetryOnFailure, RetryInterval: frame.DurationOr(in.Strategy.RetryInterval, 0),
			IgnoreTestFailures: retryIgnoresTests()}
	}
	out := helm.Remediation{Strategy: helm.RemediateOnFailure}
	if r := in.Remediation; r != nil {
		out.Retries, out.RemediateLastFailure = r.Retries, r.RemediateLastFailure
		out.IgnoreTestFailures = r.IgnoreTestFailures
	}
	return out
}

func upgradeRemediation(up helmv2.Upgrade) helm.Remediation {
	if up.Strategy != nil && up.Strategy.Name == string(helmv2.ActionStrategyRetryOnFailure) {
		return helm.Remediation{Strategy: helm.RetryOnFailure, RetryInterval: frame.DurationOr(up.Strategy.RetryInterval, 0),
			IgnoreTestFailures: retryIgnoresTests()}
	}
	out := helm.Remediation{Strategy: helm.RemediateOnFailure}
	if r := up.Remediation; r != nil {
		out.Retries, out.RemediateLastFailure = r.Retries, r.RemediateLastFailure
		out.IgnoreTestFailures = r.IgnoreTestFailures
		if r.GetStrategy() == helmv2.UninstallRemediationStrategy {
			out.Remedy = helm.ActionUninstall
		}
	}
	return out
}

// helmState reads the remediation state kept in HelmRelease status: the
// failure counts of the chart version and values last attempted, which
// apply/helm starts again for a new chart version or new values, as
// helm-controller's failure reset.
func helmState(obj *helmv2.HelmRelease) helm.State {
	st := helm.State{
		Digest:          helm.StateDigest(obj.Status.LastAttemptedRevision, obj.Status.LastAttemptedConfigDigest),
		InstallFailures: int(obj.Status.InstallFailures),
		UpgradeFailures: int(obj.Status.UpgradeFailures),
	}
	if c := readyCondition(obj); c != nil && c.Status == metav1.ConditionFalse {
		st.LastFailure = c.LastTransitionTime.Time
	}
	return st
}

func readyCondition(obj *helmv2.HelmRelease) *metav1.Condition {
	for i := range obj.Status.Conditions {
		if obj.Status.Conditions[i].Type == "Ready" {
			return &obj.Status.Conditions[i]
		}
	}
	return nil
}

// setHelmStatus records the outcome in HelmRelease status: the failure
// counts, the chart version attempted, the last action and the history
// of the records written, as helm-controller keeps them (historyAfter).
func setHelmStatus(obj *helmv2.HelmRelease, res helm.Outcome, rel helm.Release) {
	obj.Status.InstallFailures = int64(res.State.InstallFailures)
	obj.Status.UpgradeFailures = int64(res.State.UpgradeFailures)
	obj.Status.Failures = obj.Status.InstallFailures + obj.Status.UpgradeFailures
	if res.Adopted && len(res.Records) == 0 {
		// helm-controller's history stands: it verifies the record. (A
		// test run on it, as helm-controller would run it, is recorded
		// below like any other.)
		return
	}
	if res.ChartVersion != "" {
		obj.Status.LastAttemptedRevision, obj.Status.LastAttemptedRevisionDigest = res.ChartVersion, res.OCIDigest
	}
	for _, s := range res.Steps {
		if s.Action == helm.ActionInstall || s.Action == helm.ActionUpgrade {
			obj.Status.LastAttemptedReleaseAction = helmv2.ReleaseAction(s.Action)
		}
	}
	h := alignHistory(historyAfter(obj.Status.History, res.Records, res.OCIDigest), res.Stored)
	if res.Next.Kind == helm.NextDone && len(h) > 0 && h[0] != nil && h[0].Status == rcommon.StatusDeployed.String() {
		// In sync: helm-controller keeps the history down to the
		// previous deployed revision (spec.maxHistory bounds Helm's
		// records only).
		if retryStrategy(obj) {
			h.TruncateIgnoringPreviousSnapshots()
		} else {
			h.Truncate(ignoresTestFailures(obj))
		}
	}
	obj.Status.History = h
}

// retryStrategy tells whether the release's install or upgrade retries
// on failure (spec.*.strategy.name RetryOnFailure).
func retryStrategy(obj *helmv2.HelmRelease) bool {
	in, up := obj.GetInstall().Strategy, obj.GetUpgrade().Strategy
	return in != nil && in.Name == string(helmv2.ActionStrategyRetryOnFailure) ||
		up != nil && up.Name == string(helmv2.ActionStrategyRetryOnFailure)
}

// ignoresTestFailures is helm-controller's choice of whether a failed test
// keeps a revision from being the previous one to truncate at.
func ignoresTestFailures(obj *helmv2.HelmRelease) bool {
	switch obj.Status.LastAttemptedReleaseAction {
	case helmv2.ReleaseActionInstall:
		return obj.GetInstall().GetRemediation().MustIgnoreTestFailures(obj.GetTest().IgnoreFailures)
	case helmv2.ReleaseActionUpgrade:
		return obj.GetUpgrade().GetRemediation().MustIgnoreTestFailures(obj.GetTest().IgnoreFailures)
	}
	return obj.GetTest().IgnoreFailures
}

// knownRevision is the latest revision as the object's status recorded
// it, when Ready says that revision is in sync: what Helm's record would
// give, so that a release still in sync is confirmed without reading its
// records and its status stays as it is (helm.ReconcileOptions.Known).
// Nil when the status says anything else.
func knownRevision(obj *helmv2.HelmRelease, rel helm.Release) *helm.Result {
	h := obj.Status.History
	ready := conditions.Get(obj, meta.ReadyCondition)
	if len(h) == 0 || h[0] == nil || h[0].Status != rcommon.StatusDeployed.String() || ready == nil || ready.Status != metav1.ConditionTrue {
		return nil
	}
	chart := h[0].ChartName + "-" + h[0].ChartVersion
	for _, verb := range []helm.Action{helm.ActionInstall, helm.ActionUpgrade, helm.ActionRollback} {
		if h[0].Name == rel.Name && h[0].Namespace == rel.Namespace && ready.Message == releasedMessage(string(verb), h[0]) ||
			// As cozy-aio worded it before it wrote helm-controller's words.
			ready.Message == fmt.Sprintf("Helm %s succeeded for release %s/%s.v%d with chart %s", verb, rel.Namespace, rel.Name, h[0].Version, chart) {
			return &helm.Result{
				Revision: h[0].Version, Status: h[0].Status, Chart: chart,
				// As Helm words it; actionVerb reads the verb back.
				Description:   strings.ToUpper(string(verb[:1])) + string(verb[1:]) + " complete",
				FirstDeployed: h[0].FirstDeployed.Time, LastDeployed: h[0].LastDeployed.Time,
			}
		}
	}
	return nil
}

// adoption is helm-controller's record of the latest revision
// (status.history[0]) with the source revision it takes the chart version
// from, for apply/helm to take a release helm-controller made over without
// an upgrade (helm.ReconcileOptions.Adopt). Nil when the history is empty,
// or when spec.postRenderers or spec.commonMetadata differ from what
// helm-controller last observed: it upgrades then, and so does cozy-aio.
//
// helm-controller compares the post-render digests only when
// status.observedGeneration is behind metadata.generation; they are
// compared here on every reconcile, since cozy-aio writes
// observedGeneration on reconciles that do not reach Helm.
func adoption(obj *helmv2.HelmRelease, sourceKind, revision string) *helm.Adoption {
	h := obj.Status.History
	if len(h) == 0 || h[0] == nil {
		return nil
	}
	var pr, cm string
	if obj.Spec.PostRenderers != nil {
		pr = jsonDigest(obj.Spec.PostRenderers)
	}
	if obj.Spec.CommonMetadata != nil {
		cm = jsonDigest(obj.Spec.CommonMetadata)
	}
	if pr != obj.Status.ObservedPostRenderersDigest || cm != obj.Status.ObservedCommonMetadataDigest {
		return nil
	}
	return &helm.Adoption{Snapshot: snapshotFrom(h[0]), Revision: digestRevision(sourceKind, revision)}
}

// digestRevision is the source revision whose digest helm-controller puts
// into the chart version (helm.Chart.Revision): an OCIRepository's, an
// ExternalArtifact's that contains ":"; "" for other sources.
func digestRevision(sourceKind, revision string) string {
	if sourceKind == sourcev1.OCIRepositoryKind || sourceKind == sourcev1.ExternalArtifactKind && strings.Contains(revision, ":") {
		return revision
	}
	return ""
}

// jsonDigest is helm-controller's digest of spec.postRenderers and
// spec.commonMetadata: SHA-256 of encoding/json's Encoder output, trailing
// newline included, "sha256:<hex>".
func jsonDigest(v any) string {
	h := sha256.New()
	if err := json.NewEncoder(h).Encode(v); err != nil {
		return ""
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// snapshotFrom is s without the Flux API types.
func snapshotFrom(s *helmv2.Snapshot) helm.Snapshot {
	out := helm.Snapshot{
		APIVersion: s.APIVersion, Digest: s.Digest, Name: s.Name, Namespace: s.Namespace, Version: s.Version,
		Status: s.Status, Action: string(s.Action), ChartName: s.ChartName, ChartVersion: s.ChartVersion,
		AppVersion: s.AppVersion, ConfigDigest: s.ConfigDigest, OCIDigest: s.OCIDigest,
		FirstDeployed: s.FirstDeployed.Time, LastDeployed: s.LastDeployed.Time, Deleted: s.Deleted.Time,
	}
	if s.TestHooks != nil {
		out.TestHooks = map[string]helm.HookRun{}
		for name, t := range *s.TestHooks {
			if t != nil {
				out.TestHooks[name] = helm.HookRun{Started: t.LastStarted.Time, Completed: t.LastCompleted.Time, Phase: t.Phase}
			}
		}
	}
	return out
}

// adoptedOutcome is the Ready condition of a release helm-controller made
// and cozy-aio found in sync: helm-controller's own (its Released
// condition, which its Ready repeats), so that the takeover changes none
// of its words.
func adoptedOutcome(obj *helmv2.HelmRelease, s helm.Snapshot) frame.Outcome {
	if c := conditions.Get(obj, helmv2.ReleasedCondition); c != nil && c.Status == metav1.ConditionTrue {
		return frame.Outcome{Ready: true, Reason: c.Reason, Message: c.Message}
	}
	return frame.Succeeded("Helm release %s/%s.v%d with chart %s@%s is in sync", s.Namespace, s.Name, s.Version, s.ChartName, s.ChartVersion)
}

// splitChart splits Helm's "name-version" at the last dash before a digit.
func splitChart(s string) (string, string) {
	for i := len(s) - 1; i > 0; i-- {
		if s[i] == '-' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' && !strings.Contains(s[:i], "+") {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

func actionVerb(res helm.Outcome) string {
	for i := len(res.Steps) - 1; i >= 0; i-- {
		if a := res.Steps[i].Action; a == helm.ActionInstall || a == helm.ActionUpgrade {
			return string(a)
		}
	}
	// Nothing done: the action that made the latest revision, from Helm's
	// description of it ("Install complete", "Upgrade complete",
	// "Rollback to 2").
	d := strings.ToLower(res.Release.Description)
	for _, a := range []helm.Action{helm.ActionInstall, helm.ActionUpgrade, helm.ActionRollback} {
		if strings.HasPrefix(d, string(a)) {
			return string(a)
		}
	}
	return "reconcile"
}

// postRender maps spec.postRenderers and spec.commonMetadata onto
// apply/helm, with helm-controller's origin labels on every object.
func postRender(obj *helmv2.HelmRelease) helm.PostRender {
	p := helm.PostRender{OriginLabels: map[string]string{
		helmv2.GroupVersion.Group + "/name":      obj.Name,
		helmv2.GroupVersion.Group + "/namespace": obj.Namespace,
	}}
	for _, r := range obj.Spec.PostRenderers {
		if r.Kustomize == nil {
			continue
		}
		var k helm.KustomizeOverlay
		for _, patch := range r.Kustomize.Patches {
			k.Patches = append(k.Patches, kusttypes.Patch{Patch: patch.Patch, Target: frame.KustomizeSelector(patch.Target)})
		}
		for _, img := range r.Kustomize.Images {
			k.Images = append(k.Images, kusttypes.Image{Name: img.Name, NewName: img.NewName, NewTag: img.NewTag, Digest: img.Digest})
		}
		p.Kustomize = append(p.Kustomize, k)
	}
	if cm := obj.Spec.CommonMetadata; cm != nil {
		p.Labels, p.Annotations = cm.Labels, cm.Annotations
	}
	return p
}

// warnPostRenderers returns a PostRender.Rendered that records a Warning
// Event for each post-renderer patch whose target selects no object of
// what the post-renderer was given, and for each image override matching
// no image of what it rendered, as for a Kustomization's spec.patches and
// spec.images.
func (r *Reconciler) warnPostRenderers(obj *helmv2.HelmRelease, self frame.Ref) func(int, []byte, []byte) {
	var specIndex []int // overlay index → spec.postRenderers index
	for i, r := range obj.Spec.PostRenderers {
		if r.Kustomize != nil {
			specIndex = append(specIndex, i)
		}
	}
	return func(overlay int, in, out []byte) {
		if overlay >= len(specIndex) {
			return
		}
		i := specIndex[overlay]
		patches := obj.Spec.PostRenderers[i].Kustomize.Patches
		targets := make([]*kusttypes.Selector, len(patches))
		for j, p := range patches {
			targets[j] = frame.KustomizeSelector(p.Target)
		}
		idx, err := apply.UnmatchedTargets(in, targets)
		if err != nil {
			r.deps.Logger().V(1).Info("checking post-renderer patch targets", "helmrelease", self.String(), "error", err.Error())
		}
		for _, j := range idx {
			r.deps.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, frame.UnmatchedPatchReason, "Reconcile",
				"%s: spec.postRenderers[%d].kustomize.patches[%d] target %s matches no object, the patch has no effect",
				self, i, j, frame.DescribeSelector(patches[j].Target))
		}
		images := obj.Spec.PostRenderers[i].Kustomize.Images
		if len(images) == 0 {
			return
		}
		objs, err := apply.ReadObjects(bytes.NewReader(out), "post-renderer")
		if err != nil {
			return
		}
		for _, j := range apply.UnusedImages(objs, images) {
			r.deps.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, frame.UnusedImageReason, "Reconcile",
				"%s: spec.postRenderers[%d].kustomize.images[%d] %q matches no image of the rendered objects, the override has no effect",
				self, i, j, images[j].Name)
		}
	}
}

// rollbackOptions maps spec.rollback onto the remedying rollbacks, as
// helm-controller does, also when spec.rollback is unset: then its
// defaults hold (spec.timeout, waits on, Jobs waited for, hooks run, no
// force, no cleanupOnFail), never the install's or upgrade's settings.
func rollbackOptions(obj *helmv2.HelmRelease) *helm.RollbackOptions {
	rb := obj.GetRollback()
	wait := waitOf(obj, rb.DisableWait)
	return &helm.RollbackOptions{
		Timeout:       rb.GetTimeout(obj.GetTimeout()).Duration,
		Wait:          wait,
		WaitForJobs:   !rb.DisableWaitForJobs,
		DisableHooks:  rb.DisableHooks,
		Force:         rb.Force,
		CleanupOnFail: rb.CleanupOnFail,
		MaxHistory:    obj.GetMaxHistory(),
	}
}

// releaseName is the Helm release name of obj as helm-controller names
// it: spec.releaseName, else [<targetNamespace>-]<name>, shortened when
// longer than Helm's 53 characters to its first 40, a dash and the first
// 12 hex digits of its SHA-256.
func ReleaseName(obj *helmv2.HelmRelease) string {
	name := obj.GetReleaseName()
	if len(name) <= 53 {
		return name
	}
	return fmt.Sprintf("%s-%x", name[:40], sha256.Sum256([]byte(name)))[:53]
}
