package apply

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const statefulSet = `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: NS}
spec:
  serviceName: SERVICE
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: "postgres:17"}]
`

func TestStatefulSetServiceNameChange(t *testing.T) {
	ctx, ns := testContext(t), cp.Namespace(t)
	a := newApplier(t, Options{})
	v1 := objects(t, ns, strings.ReplaceAll(statefulSet, "SERVICE", "db-a"))
	v2 := objects(t, ns, strings.ReplaceAll(statefulSet, "SERVICE", "db-b"))
	if _, err := a.Apply(ctx, v1, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	old := &appsv1.StatefulSet{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, old); err != nil {
		t.Fatal(err)
	}
	// The Pod a StatefulSet controller would have made.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: ns, Labels: map[string]string{"app": "db"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: old.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "postgres:17"}}},
	}
	if err := cp.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}

	// Default policy: fail, naming the object and the field.
	_, err := a.Apply(ctx, v2, ApplyOptions{})
	var ie *ImmutableError
	if !errors.As(err, &ie) || !slices.Contains(ie.Fields, "spec.serviceName") ||
		!strings.Contains(err.Error(), "StatefulSet/"+ns+"/db: the update changes immutable field spec.serviceName") {
		t.Fatalf("error = %v", err)
	}

	// OrphanRecreate, chosen by annotation. envtest runs no garbage
	// collector, so the test plays its part: it orphans the dependents of a
	// StatefulSet deleted with orphan propagation and lifts the finalizer.
	sawOrphan := runOrphanGC(t, ctx, ns)
	v2[0].SetAnnotations(map[string]string{ImmutablePolicyAnnotation: string(ImmutableOrphanRecreate)})
	cs, err := a.Apply(ctx, v2, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := cs.Changes[0]; c.Action != Configured || !strings.Contains(c.Detail, "re-created (OrphanRecreate)") {
		t.Fatalf("change = %v", c)
	}
	if !sawOrphan.Load() {
		t.Fatal("the StatefulSet was not deleted with orphan propagation")
	}
	cur := &appsv1.StatefulSet{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, cur); err != nil {
		t.Fatal(err)
	}
	if cur.Spec.ServiceName != "db-b" || cur.UID == old.UID {
		t.Fatalf("StatefulSet not re-created: serviceName %q, same UID %v", cur.Spec.ServiceName, cur.UID == old.UID)
	}
	got := &corev1.Pod{}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatalf("the Pod did not survive: %v", err)
	}
	if got.DeletionTimestamp != nil || got.UID != pod.UID || len(got.OwnerReferences) != 0 {
		t.Fatalf("the Pod should survive orphaned, ready for adoption: deleting=%v owners=%v", got.DeletionTimestamp != nil, got.OwnerReferences)
	}
}

// runOrphanGC does what the garbage collector does for a StatefulSet
// deleted with orphan propagation: remove the owner references of its Pods,
// then the "orphan" finalizer. It reports whether it saw such a deletion.
func runOrphanGC(t *testing.T, ctx context.Context, ns string) *atomic.Bool {
	var saw atomic.Bool
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			sts := &appsv1.StatefulSet{}
			if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, sts); err != nil ||
				sts.DeletionTimestamp == nil || !slices.Contains(sts.Finalizers, metav1.FinalizerOrphanDependents) {
				continue
			}
			saw.Store(true)
			pods := &corev1.PodList{}
			if err := cp.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
				continue
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				p.OwnerReferences = slices.DeleteFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == sts.UID })
				_ = cp.Client.Update(ctx, p)
			}
			sts.Finalizers = slices.DeleteFunc(sts.Finalizers, func(f string) bool { return f == metav1.FinalizerOrphanDependents })
			_ = cp.Client.Update(ctx, sts)
		}
	}()
	return &saw
}

const job = `
apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: NS}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: m, image: "IMAGE"}]
`

func TestJobRecreateByKindPolicy(t *testing.T) {
	ctx, ns := testContext(t), cp.Namespace(t)
	a := newApplier(t, Options{})
	if _, err := a.Apply(ctx, objects(t, ns, strings.ReplaceAll(job, "IMAGE", "migrate:1")), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	opts := ApplyOptions{KindPolicies: map[schema.GroupKind]ImmutablePolicy{{Group: "batch", Kind: "Job"}: ImmutableRecreate}}
	cs, err := a.Apply(ctx, objects(t, ns, strings.ReplaceAll(job, "IMAGE", "migrate:2")), opts)
	if err != nil {
		t.Fatal(err)
	}
	if c := cs.Changes[0]; c.Action != Configured || !strings.Contains(c.Detail, "re-created (Recreate)") {
		t.Fatalf("change = %v", c)
	}
	j := &batchv1.Job{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "migrate"}, j); err != nil {
		t.Fatal(err)
	}
	if img := j.Spec.Template.Spec.Containers[0].Image; img != "migrate:2" {
		t.Fatalf("image = %s", img)
	}
}
