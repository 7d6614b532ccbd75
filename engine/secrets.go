package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// secret reads a Secret in namespace, naming the referrer in the error.
func (e *Engine) secret(ctx context.Context, referrer, namespace, name string) (*corev1.Secret, error) {
	var s corev1.Secret
	if err := e.mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s); err != nil {
		return nil, fmt.Errorf("%s: reading Secret %s/%s: %w", referrer, namespace, name, err)
	}
	return &s, nil
}
