package cluster

import (
	"context"
	"fmt"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// requestToken asks the management cluster for a token of g's
// ServiceAccount in namespace with g's audiences, and refuses it if the
// management cluster's own API server accepts it. Flux makes the same
// refusal by comparing the audiences with those of its own token file; a
// TokenReview asks the API server itself, so it also holds outside a Pod
// and for API servers with several audiences.
func requestToken(ctx context.Context, c client.Client, namespace string, g genericCluster) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: g.serviceAccount, Namespace: namespace}}
	id := fmt.Sprintf("ServiceAccount/%s/%s", namespace, g.serviceAccount)
	req := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: g.audiences}}
	if err := c.SubResource("token").Create(ctx, sa, req); err != nil {
		return "", fmt.Errorf("requesting a token for %s: %w", id, err)
	}
	review := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: req.Status.Token}}
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("checking that the token for %s is not valid on the management cluster: %w", id, err)
	}
	if review.Status.Authenticated {
		return "", fmt.Errorf("key %q: the management cluster accepts a token with audiences %s; "+
			"refusing to send a token for %s to %s", meta.KubeConfigKeyAudiences, strings.Join(g.audiences, ","), id, g.host)
	}
	return req.Status.Token, nil
}
