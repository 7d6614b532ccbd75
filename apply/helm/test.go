package helm

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// TestOptions configures the run of a release's test hooks: Test, and the
// runs Reconcile makes when ReconcileOptions.Test is set.
type TestOptions struct {
	// Timeout bounds the test hooks. Default: DefaultTimeout.
	Timeout time.Duration
	// Filters select the test hooks by name, as Helm's --filter: a hook
	// named by an Exclude filter does not run and, when any filter
	// includes, only the hooks it names run. Default: all test hooks.
	Filters []TestFilter
	// IgnoreFailures makes Reconcile record a failed test without counting
	// it as a failure of the install or upgrade it follows (Flux's
	// test.ignoreFailures), unless the action's
	// Remediation.IgnoreTestFailures says otherwise. Test ignores it. Default: false, a failed test is remedied by the
	// action's policy.
	IgnoreFailures bool
}

// TestFilter selects test hooks by name.
type TestFilter struct {
	// Name is the hook's name (metadata.name of its object).
	Name string
	// Exclude leaves the hook out instead of selecting it.
	Exclude bool
}

// HookRun is the last run of a hook, as Helm records it in the release.
type HookRun struct {
	// Started and Completed are zero when the hook has not started or
	// completed.
	Started, Completed time.Time
	// Phase is Helm's phase: "Running", "Succeeded", "Failed", "Unknown",
	// or "" when the hook never ran.
	Phase string
}

// TestReport is the outcome of a run of the test hooks.
type TestReport struct {
	// Revision is the revision tested.
	Revision int
	// Err is nil when every selected hook succeeded; else a *TestError
	// when a hook failed, or the error that stopped the run.
	Err error
}

// TestError means a test hook of a revision failed (or did not complete
// in time). Helm stops at the first failed hook.
type TestError struct {
	// Revision is the revision tested.
	Revision int
	// Hooks are the names of the failed hooks.
	Hooks []string
	// Err is Helm's error.
	Err error
}

func (e *TestError) Error() string {
	return fmt.Sprintf("test hook %s of revision %d failed: %v", strings.Join(e.Hooks, ", "), e.Revision, e.Err)
}

func (e *TestError) Unwrap() error { return e.Err }

// Test runs the release's test hooks on its latest revision.
func (m *Manager) Test(ctx context.Context, rel Release, o TestOptions) (Result, error) {
	return locked(ctx, m, rel, ActionTest, func() (Result, error) {
		s, err := m.newSession(ctx, rel, 0)
		if err != nil {
			return Result{Action: ActionTest}, wrap(rel, ActionTest, err)
		}
		r, err := s.test(o)
		return resultOf(ActionTest, r), err
	})
}

// test runs the test hooks of the latest revision with Helm's
// ReleaseTesting, in hook weight order. Helm waits for each hook object
// (a Pod until its phase is Succeeded or Failed, a Job until it completes
// or fails) and records each run in the release. The hooks are then
// deleted by their delete policy, as `helm test` does.
func (s *session) test(o TestOptions) (*releasev1.Release, error) {
	var out *releasev1.Release
	err := s.step(ActionTest, func() error {
		t := action.NewReleaseTesting(s.cfg)
		t.Namespace = s.rel.namespace()
		t.Timeout = timeoutOr(o.Timeout)
		t.WaitOptions = s.waitOptions()
		for _, f := range o.Filters {
			key := action.IncludeNameFilter
			if f.Exclude {
				key = action.ExcludeNameFilter
			}
			t.Filters[key] = append(t.Filters[key], f.Name)
		}
		r, shutdown, err := t.Run(s.rel.Name)
		out, _ = r.(*releasev1.Release)
		if shutdown != nil {
			if serr := shutdown(); serr != nil && err == nil {
				err = fmt.Errorf("deleting test hooks: %w", serr)
			}
		}
		if err != nil && out != nil {
			if failed := failedTests(out); len(failed) > 0 {
				err = &TestError{Revision: out.Version, Hooks: failed, Err: err}
			}
		}
		return err
	})
	return out, err
}

// testsOf returns the last runs of a revision's test hooks by name; nil
// when it has none.
func testsOf(r *releasev1.Release) map[string]HookRun {
	var out map[string]HookRun
	for _, h := range r.Hooks {
		if !isTestHook(h) {
			continue
		}
		if out == nil {
			out = map[string]HookRun{}
		}
		out[h.Name] = HookRun{Started: h.LastRun.StartedAt, Completed: h.LastRun.CompletedAt, Phase: string(h.LastRun.Phase)}
	}
	return out
}

func isTestHook(h *releasev1.Hook) bool {
	if h == nil {
		return false
	}
	for _, e := range h.Events {
		if e == releasev1.HookTest {
			return true
		}
	}
	return false
}

func failedTests(r *releasev1.Release) []string {
	var out []string
	for name, run := range testsOf(r) {
		if run.Phase == string(releasev1.HookPhaseFailed) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// selected reports whether filters select a hook, as Helm's filters do.
func selected(name string, filters []TestFilter) bool {
	include := false
	for _, f := range filters {
		if f.Exclude && f.Name == name {
			return false
		}
		include = include || !f.Exclude
	}
	if !include {
		return true
	}
	for _, f := range filters {
		if !f.Exclude && f.Name == name {
			return true
		}
	}
	return false
}

// testState is how a revision's selected test hooks last ran.
type testState int

const (
	testsPassed  testState = iota // every selected hook succeeded (or there is none)
	testsPending                  // a selected hook has not run to an end
	testsFailed                   // a selected hook failed
)

func testStateOf(r *releasev1.Release, filters []TestFilter) testState {
	st := testsPassed
	for name, run := range testsOf(r) {
		if !selected(name, filters) {
			continue
		}
		switch run.Phase {
		case string(releasev1.HookPhaseFailed):
			return testsFailed
		case string(releasev1.HookPhaseSucceeded):
		default:
			st = testsPending
		}
	}
	return st
}

// runTests tests the latest revision and reports it in out. The error is
// nil when the tests passed or their failure is ignored.
// pol is the policy of the action that made the revision.
func (s *session) runTests(ro ReconcileOptions, pol Remediation, out *Outcome) error {
	o := *ro.Test
	ro.starting(ActionTest, timeoutOr(o.Timeout))
	r, err := s.test(o)
	res := resultOf(ActionTest, r)
	out.Steps = append(out.Steps, res)
	out.Test = &TestReport{Revision: res.Revision, Err: err}
	if err != nil && pol.ignoreTests(o.IgnoreFailures) && isTestError(err) {
		return nil
	}
	return err
}

func isTestError(err error) bool {
	var te *TestError
	return errors.As(err, &te)
}

// testDeployed handles the tests of a deployed revision that is up to
// date, as helm-controller does: it tests a revision whose selected hooks
// have not run, and a revision whose test failed (not ignored) is a failed
// release: it stalls when the retries are exhausted, and is otherwise
// upgraded again. stop says the caller returns err; upgrade says it
// upgrades.
func (s *session) testDeployed(o ReconcileOptions, latest *releasev1.Release, out *Outcome) (stop, upgrade bool, err error) {
	if o.Test == nil {
		return false, false, nil
	}
	a, pol := ActionUpgrade, o.Upgrade
	if latest.Info != nil && strings.HasPrefix(strings.ToLower(latest.Info.Description), string(ActionInstall)) {
		a, pol = ActionInstall, o.Install
	}
	switch testStateOf(latest, o.Test.Filters) {
	case testsPending:
		err := s.runTests(o, pol, out)
		if err == nil {
			return false, false, nil
		}
		if s.records.stopped() != nil || !isTestError(err) {
			return true, false, err
		}
		return true, false, s.failure(o, a, pol, err, out)
	case testsFailed:
		if pol.ignoreTests(o.Test.IgnoreFailures) {
			return false, false, nil
		}
		if ok, next := Admit(out.State, a, pol, s.m.opts.Now()); !ok {
			out.Next = next
			return true, false, wrap(s.rel, ActionTest, &TestError{Revision: latest.Version, Hooks: failedTests(latest),
				Err: errors.New("the last test of the deployed revision failed")})
		}
		return false, true, nil
	}
	return false, false, nil
}
