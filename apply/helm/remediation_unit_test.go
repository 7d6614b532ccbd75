package helm_test

import (
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/apply/helm"
)

func TestAdmitAndAfterFailure(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	yes, no := true, false
	cases := []struct {
		name     string
		a        helm.Action
		pol      helm.Remediation
		failures int // before this failure
		remedy   helm.Action
		next     helm.NextKind
		after    time.Duration
	}{
		{"install default: keep the failure, stall", helm.ActionInstall, helm.Remediation{}, 0, helm.ActionNone, helm.NextStalled, 0},
		{"install default, remediate last", helm.ActionInstall, helm.Remediation{RemediateLastFailure: &yes}, 0, helm.ActionUninstall, helm.NextStalled, 0},
		{"upgrade 2 retries, first failure", helm.ActionUpgrade, helm.Remediation{Retries: 2}, 0, helm.ActionRollback, helm.NextRetry, 0},
		{"upgrade 2 retries, second failure", helm.ActionUpgrade, helm.Remediation{Retries: 2}, 1, helm.ActionRollback, helm.NextRetry, 0},
		{"upgrade 2 retries, last failure remediated by default", helm.ActionUpgrade, helm.Remediation{Retries: 2}, 2, helm.ActionRollback, helm.NextStalled, 0},
		{"upgrade 2 retries, last failure kept", helm.ActionUpgrade, helm.Remediation{Retries: 2, RemediateLastFailure: &no}, 2, helm.ActionNone, helm.NextStalled, 0},
		{"upgrade remedy uninstall", helm.ActionUpgrade, helm.Remediation{Retries: 1, Remedy: helm.ActionUninstall}, 0, helm.ActionUninstall, helm.NextRetry, 0},
		{"install unlimited retries", helm.ActionInstall, helm.Remediation{Retries: -1}, 100, helm.ActionUninstall, helm.NextRetry, 0},
		{"retry on failure, default interval", helm.ActionUpgrade, helm.Remediation{Strategy: helm.RetryOnFailure}, 7, helm.ActionNone, helm.NextRetry, helm.DefaultRetryInterval},
		{"retry on failure, interval", helm.ActionInstall, helm.Remediation{Strategy: helm.RetryOnFailure, RetryInterval: time.Minute}, 0, helm.ActionNone, helm.NextRetry, time.Minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := helm.State{Digest: "d", InstallFailures: c.failures, UpgradeFailures: c.failures}
			got, plan := helm.AfterFailure(st, c.a, c.pol, t0)
			if plan.Remedy != c.remedy || plan.Next.Kind != c.next || plan.Next.After != c.after {
				t.Fatalf("plan %+v, want remedy %q next %s after %s", plan, c.remedy, c.next, c.after)
			}
			if got.LastFailure != t0 || got.Digest != "d" {
				t.Fatalf("state %+v", got)
			}
			// Admit agrees: a stalled plan admits no attempt.
			ok, next := helm.Admit(got, c.a, c.pol, t0)
			if c.next == helm.NextStalled && (ok || next.Kind != helm.NextStalled) {
				t.Fatalf("admitted after exhaustion: %v %+v", ok, next)
			}
			if c.pol.Strategy != helm.RetryOnFailure && c.next == helm.NextRetry && !ok {
				t.Fatalf("not admitted with retries left: %+v", next)
			}
		})
	}
}

func TestAdmitRetryOnFailureWaitsForItsInterval(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := helm.Remediation{Strategy: helm.RetryOnFailure, RetryInterval: 30 * time.Second}
	st := helm.State{UpgradeFailures: 3, LastFailure: t0}
	for _, c := range []struct {
		at   time.Duration
		ok   bool
		wait time.Duration
	}{
		{0, false, 30 * time.Second},
		{10 * time.Second, false, 20 * time.Second},
		{30 * time.Second, true, 0},
		{time.Hour, true, 0},
	} {
		ok, next := helm.Admit(st, helm.ActionUpgrade, pol, t0.Add(c.at))
		if ok != c.ok || next.After != c.wait {
			t.Errorf("at +%s: ok %v next %+v, want ok %v after %s", c.at, ok, next, c.ok, c.wait)
		}
	}
	// A never-failed release is always admitted.
	if ok, _ := helm.Admit(helm.State{}, helm.ActionInstall, helm.Remediation{}, t0); !ok {
		t.Error("fresh state not admitted")
	}
}

func TestHolderDead(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	self := helm.Holder{ID: "engine-0", Start: t0}
	alive := func(h helm.Holder) bool { return h.ID == "engine-1" }
	for _, c := range []struct {
		name     string
		recorded helm.Holder
		alive    func(helm.Holder) bool
		dead     bool
	}{
		{"no holder: another tool", helm.Holder{}, nil, true},
		{"older incarnation", helm.Holder{ID: "engine-0", Start: t0.Add(-time.Minute)}, nil, true},
		{"this incarnation, lock free", self, nil, true},
		{"newer incarnation", helm.Holder{ID: "engine-0", Start: t0.Add(time.Minute)}, nil, false},
		{"other process, default", helm.Holder{ID: "engine-1", Start: t0}, nil, true},
		{"other process, alive", helm.Holder{ID: "engine-1", Start: t0}, alive, false},
		{"other process, not alive", helm.Holder{ID: "engine-2", Start: t0}, alive, true},
	} {
		if got := helm.HolderDead(c.recorded, self, c.alive); got != c.dead {
			t.Errorf("%s: dead %v, want %v", c.name, got, c.dead)
		}
	}
}

func TestMergeValues(t *testing.T) {
	base := map[string]any{"a": map[string]any{"b": 1, "c": []any{1, 2}}, "d": "x"}
	over := map[string]any{"a": map[string]any{"c": []any{3}, "e": nil}, "f": true}
	got := helm.MergeValues(base, over)
	a := got["a"].(map[string]any)
	if a["b"] != 1 || len(a["c"].([]any)) != 1 || got["d"] != "x" || got["f"] != true {
		t.Fatalf("merged %v", got)
	}
	if _, ok := a["e"]; !ok {
		t.Fatal("a nil value must be kept, so that Helm deletes the default")
	}
	a["b"] = 2
	if base["a"].(map[string]any)["b"] != 1 {
		t.Fatal("MergeValues modified a layer")
	}
}
