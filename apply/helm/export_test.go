package helm

import (
	"helm.sh/helm/v4/pkg/storage/driver"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// NewReleaseSecrets exposes the Secret driver to the external tests.
func NewReleaseSecrets(impl typedcorev1.SecretInterface) driver.Driver {
	return &releaseSecrets{impl: impl}
}

// RecordBomb exposes recordBomb to the external tests.
var RecordBomb = recordBomb
