package health

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/internal/testenv"
)

func deployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
}

// markReady writes the status a deployment controller writes once the
// Deployment's Pods are available.
func markReady(ctx context.Context, d *appsv1.Deployment) error {
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()},
		},
	}
	return cp.Client.Status().Update(ctx, d)
}

func refOfDeployment(d *appsv1.Deployment) ObjectRef {
	return ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: d.Namespace, Name: d.Name}
}

func TestWaiterDeploymentInProgressThenCurrent(t *testing.T) {
	ctx, ns := testContext(t), cp.Namespace(t)
	d := deployment(ns, "web")
	if err := cp.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	ref := refOfDeployment(d)
	var changes atomic.Int32
	var doneCalled atomic.Bool
	h := newWaiter(t, WaiterOptions{}).Start(ctx, []ObjectRef{ref}, WaitOptions{
		Timeout:  time.Minute,
		OnChange: func(ObjectStatus) { changes.Add(1) },
		OnDone:   func(Report, error) { doneCalled.Store(true) },
	})
	// Start returned at once; the wait goes on without us.
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		s, _ := h.Report().Status(ref)
		return s.Status == InProgress, nil
	})
	if err != nil {
		t.Fatalf("never reported InProgress: %s", h.Report())
	}
	if s, _ := h.Report().Status(ref); s.Message == "" {
		t.Errorf("InProgress without a reason: %+v", s)
	}

	if err := markReady(ctx, d); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Done():
	case <-ctx.Done():
		t.Fatal("the wait did not end")
	}
	report, err := h.Result()
	if err != nil || !report.Ready() {
		t.Fatalf("result: %v\n%s", err, report)
	}
	if changes.Load() < 2 {
		t.Errorf("OnChange called %d times, want InProgress then Current", changes.Load())
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) { return doneCalled.Load(), nil }); err != nil {
		t.Error("OnDone was not called")
	}
}

const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.health.example.com}
spec:
  group: health.example.com
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

func installWidgetCRD(t *testing.T, ctx context.Context) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yamlInto(widgetCRD, crd); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Create(ctx, crd); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return false, err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The test client maps kinds through discovery, which can lag the CRD
	// being Established (a Create then fails with "no matches for kind").
	gk := schema.GroupKind{Group: "health.example.com", Kind: "Widget"}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, err := cp.Client.RESTMapper().RESTMapping(gk, "v1")
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the test client never learnt kind Widget: %v", err)
	}
}

func TestWaiterCELTurnsCustomResourceCurrent(t *testing.T) {
	ctx, ns := testContext(t), cp.Namespace(t)
	installWidgetCRD(t, ctx)
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "health.example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": ns},
	}}
	if err := cp.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	// kstatus alone would keep this InProgress forever: Ready is False.
	w.Object["status"] = map[string]any{
		"phase":      "Provisioning",
		"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "Waiting"}},
	}
	if err := cp.Client.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	checker, err := NewChecker([]Expr{{APIVersion: "health.example.com/v1", Kind: "Widget", Current: "status.phase == 'Running'"}})
	if err != nil {
		t.Fatal(err)
	}
	ref := ObjectRef{Group: "health.example.com", Version: "v1", Kind: "Widget", Namespace: ns, Name: "w"}
	h := newWaiter(t, WaiterOptions{}).Start(ctx, []ObjectRef{ref}, WaitOptions{Timeout: time.Minute, Checker: checker})
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		s, _ := h.Report().Status(ref)
		return s.Status == InProgress, nil
	})
	if err != nil {
		t.Fatalf("never InProgress: %s", h.Report())
	}
	w.Object["status"].(map[string]any)["phase"] = "Running"
	if err := cp.Client.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	<-h.Done()
	if report, err := h.Result(); err != nil {
		t.Fatalf("%v\n%s", err, report)
	}
}

func TestWaiterTimeoutReportsWhatIsNotReady(t *testing.T) {
	ctx, ns := testContext(t), cp.Namespace(t)
	d := deployment(ns, "stuck")
	if err := cp.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fine", Namespace: ns}}
	if err := cp.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	refs := []ObjectRef{
		refOfDeployment(d),
		{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: "fine"},
		{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: "absent"},
		{Group: "nope.example.com", Version: "v1", Kind: "Gadget", Namespace: ns, Name: "g"},
	}
	report, err := newWaiter(t, WaiterOptions{}).Wait(ctx, refs, WaitOptions{Timeout: 2 * time.Second})
	var nre *NotReadyError
	if !errors.As(err, &nre) || !errors.Is(err, ErrTimeout) {
		t.Fatalf("error = %v", err)
	}
	want := map[string]Status{
		"Deployment/" + ns + "/stuck": InProgress,
		"ConfigMap/" + ns + "/fine":   Current,
		"ConfigMap/" + ns + "/absent": NotFound,
		"Gadget/" + ns + "/g":         NotFound,
	}
	for _, s := range report.Objects {
		if want[s.Object.String()] != s.Status {
			t.Errorf("%s: %s, want %s", s.Object, s.Status, want[s.Object.String()])
		}
	}
	if !strings.Contains(err.Error(), "Gadget/"+ns+"/g: NotFound: kind Gadget.nope.example.com is not served by the API server: its CustomResourceDefinition is missing") {
		t.Errorf("error does not explain the missing CRD: %v", err)
	}
}

func TestWaiterCancel(t *testing.T) {
	ctx, ns := testContext(t), cp.Namespace(t)
	d := deployment(ns, "web")
	if err := cp.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	h := newWaiter(t, WaiterOptions{}).Start(ctx, []ObjectRef{refOfDeployment(d)}, WaitOptions{})
	h.Cancel()
	<-h.Done()
	if _, err := h.Result(); !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
}

func TestWaiterEmptySetIsReady(t *testing.T) {
	report, err := newWaiter(t, WaiterOptions{}).Wait(testContext(t), nil, WaitOptions{})
	if err != nil || !report.Ready() {
		t.Fatal(report, err)
	}
}

// TestWaiterChecksEachWaitWithItsChecker runs two waits on one Waiter for
// the same object at once: the one whose Checker reads the phase ends
// Current, the one with kstatus alone sees the object InProgress.
func TestWaiterChecksEachWaitWithItsChecker(t *testing.T) {
	ctx, ns := testContext(t), cp.Namespace(t)
	installWidgetCRD(t, ctx)
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "health.example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": ns},
	}}
	if err := cp.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	w.Object["status"] = map[string]any{
		"phase":      "Running",
		"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "Waiting"}},
	}
	if err := cp.Client.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	checker, err := NewChecker([]Expr{{APIVersion: "health.example.com/v1", Kind: "Widget", Current: "status.phase == 'Running'"}})
	if err != nil {
		t.Fatal(err)
	}
	ref := ObjectRef{Group: "health.example.com", Version: "v1", Kind: "Widget", Namespace: ns, Name: "w"}
	waiter := newWaiter(t, WaiterOptions{})
	plain := waiter.Start(ctx, []ObjectRef{ref}, WaitOptions{Timeout: 2 * time.Second})
	checked := waiter.Start(ctx, []ObjectRef{ref}, WaitOptions{Timeout: time.Minute, Checker: checker})
	<-checked.Done()
	if report, err := checked.Result(); err != nil {
		t.Fatalf("with the checker: %v\n%s", err, report)
	}
	<-plain.Done()
	report, err := plain.Result()
	if s, _ := report.Status(ref); !errors.Is(err, ErrTimeout) || s.Status != InProgress {
		t.Fatalf("kstatus alone: %v, %+v", err, s)
	}
}

// A wait on an API server that dies mid-wait ends with ErrUnreachable
// once nothing has been heard from it for WaiterOptions.Unreachable,
// instead of at its own (much longer) timeout: a remote cluster that goes
// away does not hold a release for its timeout.
func TestWaiterGivesUpOnAnUnreachableAPIServer(t *testing.T) {
	ctx := testContext(t)
	other, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = other.Stop()
		}
	})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dies"}}
	if err := other.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	d := deployment(ns.Name, "stuck")
	if err := other.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(other.Config)
	cfg.Timeout = 0
	w, err := NewWaiter(cfg, WaiterOptions{Unreachable: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := w.Start(ctx, []ObjectRef{refOfDeployment(d)}, WaitOptions{Timeout: 10 * time.Minute})
	// The wait has heard the Deployment (InProgress: no controller runs).
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return h.Report().Objects[0].Status == InProgress, nil
	}); err != nil {
		t.Fatalf("the wait never saw the Deployment: %v", h.Report())
	}
	// kube-apiserver may outlast envtest's stop timeout while it drains
	// the wait's watch; it is killed then, and either way stops answering.
	if err := other.Stop(); err != nil {
		t.Logf("stopping the API server: %v", err)
	}
	stopped = true
	select {
	case <-h.Done():
	case <-time.After(5 * time.Minute):
		t.Fatal("the wait is still running 5 minutes after its API server stopped")
	}
	_, err = h.Result()
	if !errors.Is(err, ErrUnreachable) || errors.Is(err, ErrTimeout) {
		t.Fatalf("error = %v, want ErrUnreachable", err)
	}
}
