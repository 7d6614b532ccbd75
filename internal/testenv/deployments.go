package testenv

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MakeDeploymentsAvailable plays the controller-manager that a plain API
// server lacks: every 300 ms it marks the Deployments of ns Available,
// until ctx ends.
func MakeDeploymentsAvailable(ctx context.Context, c client.Client, ns string) {
	for ctx.Err() == nil {
		time.Sleep(300 * time.Millisecond)
		var list appsv1.DeploymentList
		if c.List(ctx, &list, client.InNamespace(ns)) != nil {
			continue
		}
		for i := range list.Items {
			d := &list.Items[i]
			if d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == 1 {
				continue
			}
			d.Status = appsv1.DeploymentStatus{
				ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{
					{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
					{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
				},
			}
			_ = c.Status().Update(ctx, d)
		}
	}
}
