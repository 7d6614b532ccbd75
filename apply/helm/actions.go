package helm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	"github.com/cozystack/cozy-aio/health"
)

// DefaultTimeout bounds an action when no Timeout is set.
const DefaultTimeout = 5 * time.Minute

// DefaultMaxHistory is how many revisions are kept when MaxHistory is 0.
const DefaultMaxHistory = 5

// Wait is how an action waits for the release's objects.
type Wait string

// Wait strategies.
const (
	// WaitKStatus waits with kstatus through Helm's event-driven watcher
	// until every object is Current. The default.
	WaitKStatus Wait = ""
	// WaitNone waits for hooks only.
	WaitNone Wait = "none"
	// WaitLegacy waits with Helm 3's readiness rules (polling; Pods,
	// Deployments, Services, Jobs and PVCs by their own conditions), as
	// helm-controller's waitStrategy legacy. Health checkers are not
	// used.
	WaitLegacy Wait = "legacy"
)

func (w Wait) strategy() kube.WaitStrategy {
	switch w {
	case WaitNone:
		return kube.HookOnlyStrategy
	case WaitLegacy:
		return kube.LegacyStrategy
	}
	return kube.StatusWatcherStrategy
}

// Spec is what a release is asked to be. The zero value of each field is
// its default.
type Spec struct {
	// Chart is where the chart comes from. Required.
	Chart Chart
	// Values are layers merged over the chart's defaults, later layers
	// winning (see MergeValues). Default: the chart's defaults.
	Values []map[string]any
	// Timeout bounds the action, its waits and hooks. Default: DefaultTimeout.
	Timeout time.Duration
	// Wait is how to wait for the objects. Default: WaitKStatus.
	Wait Wait
	// WaitForJobs also waits for Jobs to complete. Default: false.
	WaitForJobs bool
	// DisableHooks skips the chart's hooks. Default: false.
	DisableHooks bool
	// DisableSchemaValidation skips the chart's values.schema.json.
	// Default: false.
	DisableSchemaValidation bool
	// MaxHistory is how many revisions to keep. Negative: all.
	// Default: DefaultMaxHistory.
	MaxHistory int
	// PostRender changes the rendered manifests before they are applied.
	// Default: no change.
	PostRender PostRender
	// HealthChecker decides the status of the objects the action waits
	// for, with CEL expressions per kind (spec.healthCheckExprs).
	// Default: nil, kstatus alone.
	HealthChecker *health.Checker
}

func (s Spec) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return DefaultTimeout
}

func maxHistory(n int) int {
	switch {
	case n < 0:
		return 0
	case n == 0:
		return DefaultMaxHistory
	}
	return n
}

func (s *session) waitOptions() []kube.WaitOption {
	return []kube.WaitOption{kube.WithWaitContext(s.ctx)}
}

// InstallOptions configures Install.
type InstallOptions struct {
	Spec
	// CRDs is the policy for the chart's crds/ directory. Default: CRDCreate.
	CRDs CRDPolicy
	// CreateNamespace creates the release namespace. Default: false.
	CreateNamespace bool
	// DisableTakeOwnership refuses objects that exist without this
	// release's ownership annotations, as the helm CLI does. Default:
	// false, the release takes them over (helm-controller installs with Helm's
	// TakeOwnership unless spec.install.disableTakeOwnership).
	DisableTakeOwnership bool
}

// UpgradeOptions configures Upgrade.
type UpgradeOptions struct {
	Spec
	// CRDs is the policy for the chart's crds/ directory. Default: CRDSkip.
	CRDs CRDPolicy
	// CleanupOnFail deletes objects created by a failed upgrade. Default: false.
	CleanupOnFail bool
	// Force replaces objects that cannot be patched. Default: false.
	Force bool
	// PreserveValues reuses the values of the last release under
	// Spec.Values (Helm's --reuse-values). Default: false.
	PreserveValues bool
	// DisableTakeOwnership refuses objects new to the release that exist
	// without its ownership annotations. Default: false, the release takes
	// them over (helm-controller: spec.upgrade.disableTakeOwnership).
	DisableTakeOwnership bool
}

// RollbackOptions configures Rollback.
type RollbackOptions struct {
	// Revision to roll back to. Default: the last deployed revision, else
	// the previous one.
	Revision int
	// Timeout bounds the rollback. Default: DefaultTimeout.
	Timeout time.Duration
	// Wait is how to wait for the objects. Default: WaitKStatus.
	Wait Wait
	// WaitForJobs also waits for Jobs. Default: false.
	WaitForJobs bool
	// DisableHooks skips the hooks. Default: false.
	DisableHooks bool
	// CleanupOnFail deletes objects created by a failed rollback. Default: false.
	CleanupOnFail bool
	// Force replaces objects that cannot be patched. Default: false.
	Force bool
	// MaxHistory is how many revisions to keep. Default: DefaultMaxHistory.
	MaxHistory int
}

// UninstallOptions configures Uninstall.
type UninstallOptions struct {
	// Timeout bounds the uninstall. Default: DefaultTimeout.
	Timeout time.Duration
	// Wait is how to wait for the objects to go. Default: WaitKStatus.
	Wait Wait
	// DisableHooks skips the hooks. Default: false.
	DisableHooks bool
	// KeepHistory keeps the release Secrets, marked uninstalled.
	// Default: false.
	KeepHistory bool
	// DeletionPropagation is how the objects' dependents are deleted:
	// "background", "foreground" or "orphan". Default: "background".
	DeletionPropagation string
}

func timeoutOr(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return DefaultTimeout
}

// prepared is a loaded chart with merged values and their digest.
type prepared struct {
	chart  *chartv2.Chart
	values map[string]any
	// digest is the digest label of a revision made of the chart archive
	// and values: it does not depend on Chart.Revision, so that the
	// records made before the version carried the source's digest stay up
	// to date.
	digest string
	// ociDigest is the source's digest ChartVersionWithDigest gave.
	ociDigest string
	// state is the State.Digest of the chart version and values.
	state string
}

func (m *Manager) prepare(ctx context.Context, s Spec) (prepared, error) {
	ch, cd, err := m.loadChart(ctx, s.Chart)
	if err != nil {
		return prepared{}, err
	}
	p := prepared{chart: ch, values: MergeValues(s.Values...)}
	if s.Chart.Revision != "" && ch.Metadata != nil {
		// ch is this action's copy: the cached chart keeps its version.
		v, oci, err := ChartVersionWithDigest(ch.Metadata.Version, s.Chart.Revision)
		if err != nil {
			return prepared{}, &ChartVersionError{Err: err}
		}
		ch.Metadata.Version, p.ociDigest = v, oci
	}
	p.digest = specDigest(cd, p.values, s.PostRender.digestPart())
	p.state = StateDigest(p.version(), ConfigDigest(p.values))
	return p, nil
}

func (p prepared) version() string {
	if p.chart == nil || p.chart.Metadata == nil {
		return ""
	}
	return p.chart.Metadata.Version
}

// describe puts what p installs in out.
func (p prepared) describe(out *Outcome) {
	out.ChartVersion, out.OCIDigest = p.version(), p.ociDigest
}

// Install installs a release. A release whose latest revision failed or
// was uninstalled is replaced; a pending revision of a dead holder is
// recovered first (see the package doc).
func (m *Manager) Install(ctx context.Context, rel Release, o InstallOptions) (Result, error) {
	return locked(ctx, m, rel, ActionInstall, func() (Result, error) {
		s, p, err := m.begin(ctx, rel, o.Spec, ActionInstall)
		if err != nil {
			return Result{Action: ActionInstall}, err
		}
		r, err := s.install(o, p)
		return resultOf(ActionInstall, r), err
	})
}

// Upgrade upgrades a release that has a history.
func (m *Manager) Upgrade(ctx context.Context, rel Release, o UpgradeOptions) (Result, error) {
	return locked(ctx, m, rel, ActionUpgrade, func() (Result, error) {
		s, p, err := m.begin(ctx, rel, o.Spec, ActionUpgrade)
		if err != nil {
			return Result{Action: ActionUpgrade}, err
		}
		r, err := s.upgrade(o, p)
		return resultOf(ActionUpgrade, r), err
	})
}

// begin opens a session, recovers a dead holder's pending revision and
// loads the chart.
func (m *Manager) begin(ctx context.Context, rel Release, spec Spec, a Action) (*session, prepared, error) {
	s, err := m.newSession(ctx, rel, maxHistory(spec.MaxHistory))
	if err != nil {
		return nil, prepared{}, wrap(rel, a, err)
	}
	s.useChecker(spec.HealthChecker)
	if _, err := s.recoverPending(remedyOptions(spec)); err != nil {
		return nil, prepared{}, err
	}
	p, err := m.prepare(ctx, spec)
	if err != nil {
		return nil, prepared{}, wrap(rel, a, err)
	}
	return s, p, nil
}

func (s *session) install(o InstallOptions, p prepared) (*releasev1.Release, error) {
	h, err := s.history()
	if err != nil {
		return nil, wrap(s.rel, ActionInstall, err)
	}
	replace := false
	if l := h.latest(); l != nil {
		st := statusOf(l)
		if h.deployed() != nil || (st != rcommon.StatusFailed && st != rcommon.StatusUninstalled && st != rcommon.StatusSuperseded) {
			return nil, wrap(s.rel, ActionInstall, fmt.Errorf("release exists with status %s (revision %d); upgrade it instead", st, l.Version))
		}
		replace = true // "has no deployed releases": install over the failed history
	}
	var out *releasev1.Release
	err = s.step(ActionInstall, func() error {
		if err := s.applyCRDs(p, o.CRDs.or(CRDCreate), o.timeout()); err != nil {
			return err
		}
		in := s.newInstall(o, p, replace)
		in.PostRenderer = s.planning.wrap(in.PostRenderer)
		r, err := in.Run(p.chart, p.values)
		out, _ = r.(*releasev1.Release)
		return err
	})
	return out, err
}

func (s *session) upgrade(o UpgradeOptions, p prepared) (*releasev1.Release, error) {
	var out *releasev1.Release
	err := s.step(ActionUpgrade, func() error {
		if err := s.applyCRDs(p, o.CRDs.or(CRDSkip), o.timeout()); err != nil {
			return err
		}
		up := s.newUpgrade(o, p)
		up.PostRenderer = s.planning.wrap(up.PostRenderer)
		r, err := up.Run(s.rel.Name, p.chart, p.values)
		out, _ = r.(*releasev1.Release)
		if errors.Is(err, errNoDeployed) {
			return fmt.Errorf("%w: %w", ErrReleaseNotFound, err)
		}
		return err
	})
	if out == nil {
		out = s.latest()
	}
	return out, err
}

// newInstall is Helm's install as o and p ask, for the action and for its
// plan alike.
func (s *session) newInstall(o InstallOptions, p prepared, replace bool) *action.Install {
	in := action.NewInstall(s.cfg)
	in.ReleaseName, in.Namespace = s.rel.Name, s.rel.namespace()
	in.ServerSideApply, in.ForceConflicts = true, true
	in.Timeout, in.WaitStrategy, in.WaitOptions = o.timeout(), o.Wait.strategy(), s.waitOptions()
	in.WaitForJobs, in.DisableHooks = o.WaitForJobs, o.DisableHooks
	in.SkipCRDs = true // applyCRDs did it, by policy
	in.SkipSchemaValidation = o.DisableSchemaValidation
	// The API server validates every object (SSA, fieldValidation
	// Strict); the client-side OpenAPI check would download and parse
	// the cluster's OpenAPI documents on every action.
	in.DisableOpenAPIValidation = true
	in.CreateNamespace = o.CreateNamespace
	in.TakeOwnership = !o.DisableTakeOwnership
	in.Replace = replace
	in.Labels = map[string]string{LabelDigest: p.digest}
	if !o.PostRender.isZero() {
		in.PostRenderer = o.PostRender
	}
	return in
}

// newUpgrade is Helm's upgrade as o and p ask, for the action and for its
// plan alike.
func (s *session) newUpgrade(o UpgradeOptions, p prepared) *action.Upgrade {
	up := action.NewUpgrade(s.cfg)
	up.Namespace = s.rel.namespace()
	up.ServerSideApply, up.ForceConflicts = "true", true
	up.Timeout, up.WaitStrategy, up.WaitOptions = o.timeout(), o.Wait.strategy(), s.waitOptions()
	up.WaitForJobs, up.DisableHooks = o.WaitForJobs, o.DisableHooks
	up.SkipCRDs = true
	up.SkipSchemaValidation = o.DisableSchemaValidation
	up.DisableOpenAPIValidation = true // see install
	up.MaxHistory = maxHistory(o.MaxHistory)
	up.CleanupOnFail, up.ForceReplace = o.CleanupOnFail, o.Force
	up.TakeOwnership = !o.DisableTakeOwnership
	// The caller's layers are the whole truth, unless asked to
	// preserve the last release's values (spec.upgrade.preserveValues).
	up.ResetValues, up.ReuseValues = !o.PreserveValues, o.PreserveValues
	up.Labels = map[string]string{LabelDigest: p.digest}
	if !o.PostRender.isZero() {
		up.PostRenderer = o.PostRender
	}
	return up
}

// latest reads the newest revision, for results after a failed action.
func (s *session) latest() *releasev1.Release {
	h, err := s.history()
	if err != nil {
		return nil
	}
	return h.latest()
}

// Rollback rolls a release back.
func (m *Manager) Rollback(ctx context.Context, rel Release, o RollbackOptions) (Result, error) {
	return locked(ctx, m, rel, ActionRollback, func() (Result, error) {
		s, err := m.newSession(ctx, rel, maxHistory(o.MaxHistory))
		if err != nil {
			return Result{Action: ActionRollback}, wrap(rel, ActionRollback, err)
		}
		if _, err := s.recoverPending(o); err != nil {
			return Result{Action: ActionRollback}, err
		}
		r, err := s.rollback(o)
		return resultOf(ActionRollback, r), err
	})
}

func (s *session) rollback(o RollbackOptions) (*releasev1.Release, error) {
	h, err := s.history()
	if err != nil {
		return nil, wrap(s.rel, ActionRollback, err)
	}
	if len(h) == 0 {
		return nil, wrap(s.rel, ActionRollback, ErrReleaseNotFound)
	}
	rev := o.Revision
	if rev == 0 {
		if d := h.deployed(); d != nil && d != h.latest() {
			rev = d.Version
		}
	}
	err = s.step(ActionRollback, func() error {
		rb := action.NewRollback(s.cfg)
		rb.Version = rev
		rb.ServerSideApply, rb.ForceConflicts = "true", true
		rb.Timeout, rb.WaitStrategy, rb.WaitOptions = timeoutOr(o.Timeout), o.Wait.strategy(), s.waitOptions()
		rb.WaitForJobs, rb.DisableHooks = o.WaitForJobs, o.DisableHooks
		rb.CleanupOnFail, rb.ForceReplace = o.CleanupOnFail, o.Force
		rb.MaxHistory = maxHistory(o.MaxHistory)
		return rb.Run(s.rel.Name)
	})
	return s.latest(), err
}

// Uninstall uninstalls a release. A release that does not exist is not an
// error: the Result has no revision.
func (m *Manager) Uninstall(ctx context.Context, rel Release, o UninstallOptions) (Result, error) {
	return locked(ctx, m, rel, ActionUninstall, func() (Result, error) {
		s, err := m.newSession(ctx, rel, 0)
		if err != nil {
			return Result{Action: ActionUninstall}, wrap(rel, ActionUninstall, err)
		}
		// A pending revision is uninstalled whoever holds it only when its
		// holder is dead; recoverPending says which.
		if _, err := s.recoverPending(RollbackOptions{Timeout: o.Timeout, Wait: o.Wait, DisableHooks: o.DisableHooks}); err != nil {
			return Result{Action: ActionUninstall}, err
		}
		r, err := s.uninstall(o)
		return resultOf(ActionUninstall, r), err
	})
}

func (s *session) uninstall(o UninstallOptions) (*releasev1.Release, error) {
	var out *releasev1.Release
	err := s.step(ActionUninstall, func() error {
		un := action.NewUninstall(s.cfg)
		un.IgnoreNotFound = true
		un.KeepHistory = o.KeepHistory
		un.DisableHooks = o.DisableHooks
		un.Timeout, un.WaitStrategy, un.WaitOptions = timeoutOr(o.Timeout), o.Wait.strategy(), s.waitOptions()
		un.DeletionPropagation = o.DeletionPropagation
		if un.DeletionPropagation == "" {
			un.DeletionPropagation = "background"
		}
		resp, err := un.Run(s.rel.Name)
		if resp != nil && o.KeepHistory {
			out, _ = resp.Release.(*releasev1.Release)
		}
		return err
	})
	return out, err
}

// Get returns the release's latest revision, with ErrReleaseNotFound when
// it has none.
func (m *Manager) Get(ctx context.Context, rel Release) (Result, error) {
	s, err := m.newSession(ctx, rel, 0)
	if err != nil {
		return Result{}, wrap(rel, ActionNone, err)
	}
	h, err := s.history()
	if err != nil {
		return Result{}, wrap(rel, ActionNone, err)
	}
	if len(h) == 0 {
		return Result{}, wrap(rel, ActionNone, ErrReleaseNotFound)
	}
	return resultOf(ActionNone, h.latest()), nil
}
