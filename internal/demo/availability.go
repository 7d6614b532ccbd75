package demo

import (
	"context"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// availability records, for each Deployment of the simulated cluster, when
// its Available condition first became True and how often it went back to
// False. The simulator's node lifecycle controller can mark a Ready pod
// NotReady for a moment until kwok writes its Ready back (as a kubelet's
// next sync would), which moves the condition's lastTransitionTime past a
// release's Ready time although the release waited for it: the check
// compares the release with the first time its Deployment was Available.
type availability struct {
	mu    sync.Mutex
	first map[client.ObjectKey]time.Time
	now   map[client.ObjectKey]bool
	lost  map[client.ObjectKey]int
}

// watchAvailability starts recording from the harness's watches.
func watchAvailability(ctx context.Context, c cache.Cache) (*availability, error) {
	a := &availability{first: map[client.ObjectKey]time.Time{}, now: map[client.ObjectKey]bool{}, lost: map[client.ObjectKey]int{}}
	inf, err := c.GetInformer(ctx, &appsv1.Deployment{})
	if err != nil {
		return nil, err
	}
	seen := func(obj any) {
		if d, ok := obj.(*appsv1.Deployment); ok {
			a.observe(d)
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj any) { seen(obj) },
	})
	return a, err
}

func (a *availability) observe(d *appsv1.Deployment) {
	key := client.ObjectKeyFromObject(d)
	up, since := false, time.Time{}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			up, since = true, c.LastTransitionTime.Time
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case up && a.first[key].IsZero():
		a.first[key] = since
	case !up && a.now[key]:
		a.lost[key]++
	}
	a.now[key] = up
}

// firstAvailable returns when the Deployment was first seen Available and
// how often it was Available and then not, or zero when it never was seen
// Available (or a is nil).
func (a *availability) firstAvailable(key client.ObjectKey) (time.Time, int) {
	if a == nil {
		return time.Time{}, 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.first[key], a.lost[key]
}
