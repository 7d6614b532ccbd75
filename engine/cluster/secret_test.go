package cluster_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-aio/engine/cluster"
)

func TestKubeconfigFromSecret(t *testing.T) {
	cases := []struct {
		name string
		data map[string]string
		key  string
		want string // the data returned, or the error's text
		err  bool
	}{
		{"key set", map[string]string{"kubeconfig": "k", "value": "v"}, "kubeconfig", "k", false},
		{"key set but missing", map[string]string{"value": "v"}, "kubeconfig",
			"KubeConfig secret 'tenant/remote' does not contain a 'kubeconfig' key with a kubeconfig", true},
		{"value", map[string]string{"value": "v", "value.yaml": "vy"}, "", "v", false},
		{"value.yaml", map[string]string{"value.yaml": "vy"}, "", "vy", false},
		{"empty value is still chosen", map[string]string{"value": "", "value.yaml": "vy"}, "", "", false},
		{"neither", map[string]string{"config": "c"}, "",
			"KubeConfig secret 'tenant/remote' does not contain a 'value' key with a kubeconfig", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "remote"}, Data: map[string][]byte{}}
			for k, v := range tc.data {
				s.Data[k] = []byte(v)
			}
			got, err := cluster.KubeconfigFromSecret(s, tc.key)
			switch {
			case tc.err && (err == nil || err.Error() != tc.want):
				t.Fatalf("err = %v, want %q", err, tc.want)
			case !tc.err && (err != nil || string(got) != tc.want):
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := cluster.KubeconfigFromSecret(nil, ""); err == nil || !strings.Contains(err.Error(), "nil") {
		t.Errorf("nil Secret: err = %v", err)
	}
}
