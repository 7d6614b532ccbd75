package cluster

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// KubeconfigFromSecret returns the kubeconfig that spec.kubeConfig.secretRef
// selects in secret, as helm-controller and kustomize-controller do: the
// given key when it is set; otherwise the key "value", then "value.yaml".
// The errors repeat Flux's wording, so users find them in Flux's docs.
func KubeconfigFromSecret(secret *corev1.Secret, key string) ([]byte, error) {
	if secret == nil {
		return nil, errors.New("KubeConfig secret is nil")
	}
	id := secret.Namespace + "/" + secret.Name
	switch {
	case key != "":
		if data := secret.Data[key]; data != nil {
			return data, nil
		}
		return nil, fmt.Errorf("KubeConfig secret '%s' does not contain a '%s' key with a kubeconfig", id, key)
	case secret.Data["value"] != nil:
		return secret.Data["value"], nil
	case secret.Data["value.yaml"] != nil:
		return secret.Data["value.yaml"], nil
	}
	return nil, fmt.Errorf("KubeConfig secret '%s' does not contain a 'value' key with a kubeconfig", id)
}
