package cluster_test

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-aio/engine/cluster"
)

func ExampleLoad() {
	kubeconfig := []byte(`apiVersion: v1
kind: Config
current-context: prod
contexts:
- name: prod
  context: {cluster: prod, user: deployer}
clusters:
- name: prod
  cluster: {server: "https://prod.example.com:6443"}
users:
- name: deployer
  user: {token: a-token}
- name: admin
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: aws, interactiveMode: Never}
`)
	_, err := cluster.Load(kubeconfig, cluster.LoadOptions{})
	var refused *cluster.FieldError
	if errors.As(err, &refused) {
		fmt.Println("refused:", refused.Field)
	}

	cfg, err := cluster.Load(kubeconfig, cluster.LoadOptions{AllowExec: true, UserAgent: "cozy-aio"})
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.Host, cfg.UserAgent, cfg.Timeout)
	// Output:
	// refused: users[admin].exec
	// https://prod.example.com:6443 cozy-aio 30s
}

func ExampleKubeconfigFromSecret() {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "prod-kubeconfig"},
		Data:       map[string][]byte{"value.yaml": []byte("apiVersion: v1\nkind: Config\n")},
	}
	data, err := cluster.KubeconfigFromSecret(secret, "")
	fmt.Printf("%q %v\n", data, err)

	_, err = cluster.KubeconfigFromSecret(secret, "config")
	fmt.Println(err)
	// Output:
	// "apiVersion: v1\nkind: Config\n" <nil>
	// KubeConfig secret 'tenant-a/prod-kubeconfig' does not contain a 'config' key with a kubeconfig
}
