package helm_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/source/oci"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestChartThatFailsToRenderNamesTemplateAndLine(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	rel := helm.Release{Name: "render", Namespace: ns}
	out, err := m.Reconcile(ctx, rel, helm.ReconcileOptions{Spec: helm.Spec{Chart: ociChart("broken")}}, helm.State{})
	mustContain(t, err, "helm install "+ns+"/render", "broken/templates/broken.yaml:6:", "value is required")
	if out.State.InstallFailures != 1 || out.Next.Kind != helm.NextStalled {
		t.Fatalf("outcome %+v", out)
	}
	// No lock is left behind: the next action on the release runs.
	res, err := m.Install(ctx, rel, helm.InstallOptions{Spec: helm.Spec{Chart: ociChart("broken"), Values: []map[string]any{values("value", "x")}}})
	if err != nil || res.Status != "deployed" {
		t.Fatalf("install after a render failure: %+v %v", res, err)
	}
}

func TestValuesBreakingTheSchema(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	rel := helm.Release{Name: "schema", Namespace: ns}
	_, err := m.Install(ctx, rel, helm.InstallOptions{Spec: helm.Spec{Chart: ociChart("schema"), Values: []map[string]any{values("replicas", 0)}}})
	mustContain(t, err, "helm install "+ns+"/schema", "replicas", "minimum")
}

func TestMissingChartOrVersion(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	rel := helm.Release{Name: "missing", Namespace: ns}
	for _, c := range []helm.Chart{
		{Ref: "oci://" + reg.Host() + "/charts/demo", Version: "9.9.9", Registry: oci.Registry{PlainHTTP: true}},
		{Ref: "oci://" + reg.Host() + "/charts/nope:0.1.0", Registry: oci.Registry{PlainHTTP: true}},
		{Path: "/nonexistent/demo-0.1.0.tgz"},
	} {
		_, err := m.Install(ctx, rel, helm.InstallOptions{Spec: helm.Spec{Chart: c}})
		if !errors.Is(err, helm.ErrChartNotFound) {
			t.Fatalf("%s: want ErrChartNotFound, got %v", c, err)
		}
		mustContain(t, err, ns+"/missing", c.String())
	}
}

func TestReleaseTimeout(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	rel := helm.Release{Name: "slow", Namespace: ns}
	// envtest runs no controllers: the Deployment never becomes ready.
	spec := helm.Spec{Chart: ociChart("demo"), Values: []map[string]any{values("deployment", true)}, Timeout: 2 * time.Second}
	out, err := m.Reconcile(ctx, rel, helm.ReconcileOptions{Spec: spec}, helm.State{})
	mustContain(t, err, "helm install "+ns+"/slow", "Deployment")
	if out.Release.Status != "failed" {
		t.Fatalf("release %+v", out.Release)
	}
	// The same release, now with a ready Deployment written by the test
	// while the wait runs.
	go markDeploymentAvailable(ctx, t, ns, "slow")
	spec.Timeout = time.Minute
	spec.Values = append(spec.Values, values("message", "ready"))
	out, err = m.Reconcile(ctx, rel, helm.ReconcileOptions{Spec: spec}, helm.State{})
	if err != nil || out.Release.Status != "deployed" {
		t.Fatalf("with a ready Deployment: %+v %v", out, err)
	}
}

// markDeploymentAvailable writes a ready status on a Deployment, as the
// controller-manager would.
func markDeploymentAvailable(ctx context.Context, t *testing.T, ns, name string) {
	for ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
		var d appsDeployment
		if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &d.Deployment); err != nil {
			continue
		}
		d.Status.ObservedGeneration = d.Generation
		d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = 1, 1, 1, 1
		d.Status.Conditions = []appsCondition{{Type: "Available", Status: corev1.ConditionTrue}, {Type: "Progressing", Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"}}
		if err := cp.Client.Status().Update(ctx, &d.Deployment); err == nil && d.Generation > 1 {
			return
		}
	}
}

func TestFailingHook(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	rel := helm.Release{Name: "hook", Namespace: ns}
	go failJob(ctx, ns, "hook-pre")
	out, err := m.Reconcile(ctx, rel, helm.ReconcileOptions{Spec: helm.Spec{Chart: ociChart("hook"), Timeout: time.Minute}}, helm.State{})
	mustContain(t, err, "helm install "+ns+"/hook", "pre-install", "hook-pre")
	if out.Release.Status != "failed" {
		t.Fatalf("release %+v", out.Release)
	}
}

// failJob marks a Job failed, as the Job controller would.
func failJob(ctx context.Context, ns, name string) {
	for ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
		var j batchv1.Job
		if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &j); err != nil {
			continue
		}
		now := metav1.Now()
		j.Status.StartTime = &now
		j.Status.Failed = 1
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now},
		}
		if err := cp.Client.Status().Update(ctx, &j); err == nil {
			return
		}
	}
}
