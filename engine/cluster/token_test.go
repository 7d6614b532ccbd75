package cluster_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-aio/engine/cluster"
	"github.com/cozystack/cozy-aio/internal/egress"
)

func TestGenericConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := cp.Namespace(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns}}
	if err := cp.Client.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	local := apiAudiences(ctx, t, sa)
	configMap := func(kv ...string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "remote", Namespace: ns}, Data: map[string]string{
			"provider": "generic", "address": "https://remote.example.com", "serviceAccountName": "deployer"}}
		for i := 0; i+1 < len(kv); i += 2 {
			cm.Data[kv[i]] = kv[i+1]
		}
		return cm
	}

	t.Run("token of the ServiceAccount for the remote audience", func(t *testing.T) {
		cfg, err := cluster.GenericConfig(ctx, cp.Client, ns, configMap(), cluster.LoadOptions{UserAgent: "cozy-aio/test", AllowWorkloadIdentity: true})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Host != "https://remote.example.com:443" || cfg.UserAgent != "cozy-aio/test" || cfg.Timeout != 30*time.Second {
			t.Errorf("Host, UserAgent, Timeout = %q, %q, %v", cfg.Host, cfg.UserAgent, cfg.Timeout)
		}
		review := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{
			Token: cfg.BearerToken, Audiences: []string{"https://remote.example.com"}}}
		if err := cp.Client.Create(ctx, review); err != nil {
			t.Fatal(err)
		}
		if want := "system:serviceaccount:" + ns + ":deployer"; !review.Status.Authenticated || review.Status.User.Username != want {
			t.Errorf("token review = %+v, want %s authenticated", review.Status, want)
		}
	})

	refusals := []struct {
		name string
		cm   *corev1.ConfigMap
		msg  string
	}{
		{"audience of the management cluster", configMap("audiences", "other\n"+local[0]),
			"ConfigMap/" + ns + `/remote: key "audiences": the management cluster accepts a token`},
		{"missing ServiceAccount", configMap("serviceAccountName", "ghost"),
			"ConfigMap/" + ns + "/remote: requesting a token for ServiceAccount/" + ns + "/ghost"},
		{"unsupported provider", configMap("provider", "aws"), "ConfigMap/" + ns + `/remote: kubeConfig provider "aws" is not supported`},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := cluster.GenericConfig(ctx, cp.Client, ns, tc.cm, cluster.LoadOptions{AllowWorkloadIdentity: true})
			if err == nil || !strings.HasPrefix(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want one starting with %q", err, tc.msg)
			}
			if cfg != nil {
				t.Errorf("returned a config with the error")
			}
		})
	}

	t.Run("ConfigMap of another namespace", func(t *testing.T) {
		_, err := cluster.GenericConfig(ctx, cp.Client, "other", configMap(), cluster.LoadOptions{AllowWorkloadIdentity: true})
		if err == nil || !strings.Contains(err.Error(), "not the object's") {
			t.Fatalf("err = %v, want a namespace mismatch", err)
		}
	})

	// Without the operator's opt-in no token is minted: the error names the
	// feature gate, and the ServiceAccount has no token issued for the
	// ConfigMap's audience (a TokenReview cannot tell; the error is typed).
	t.Run("workload identity not enabled", func(t *testing.T) {
		cfg, err := cluster.GenericConfig(ctx, cp.Client, ns, configMap(), cluster.LoadOptions{})
		var off *cluster.WorkloadIdentityDisabledError
		if !errors.As(err, &off) || cfg != nil {
			t.Fatalf("err = %v, want *WorkloadIdentityDisabledError", err)
		}
		if !strings.Contains(err.Error(), "--feature-gates=ObjectLevelWorkloadIdentity=true") ||
			!strings.Contains(err.Error(), "ConfigMap/"+ns+"/remote") {
			t.Fatalf("%q does not name the ConfigMap and the flag", err)
		}
	})

	// The address passes the destination policy before a token is asked for.
	for _, addr := range []string{"https://169.254.169.254", "https://[fd00:ec2::254]", "https://127.0.0.1:6443", "https://localhost"} {
		t.Run("address "+addr, func(t *testing.T) {
			_, err := cluster.GenericConfig(ctx, cp.Client, ns, configMap("address", addr), cluster.LoadOptions{AllowWorkloadIdentity: true})
			var refused *egress.RefusedError
			if !errors.As(err, &refused) || !strings.Contains(err.Error(), `key "address"`) {
				t.Fatalf("err = %v, want the destination policy's refusal naming the key", err)
			}
		})
	}
}

// apiAudiences returns the audiences the test API server accepts: those of
// a token requested without audiences. The test API server issues tokens
// (envtest configures a service account issuer), so a failure fails.
func apiAudiences(ctx context.Context, t *testing.T, sa *corev1.ServiceAccount) []string {
	t.Helper()
	req := &authnv1.TokenRequest{}
	if err := cp.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		t.Fatalf("the test API server did not issue a ServiceAccount token: %v", err)
	}
	parts := strings.Split(req.Status.Token, ".")
	if len(parts) != 3 {
		t.Fatalf("token is not a JWT: %d parts", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		Aud []string `json:"aud"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || len(claims.Aud) == 0 {
		t.Fatalf("token audiences: %v %s", err, payload)
	}
	return claims.Aud
}
