package cluster

import "fmt"

// FieldError reports a kubeconfig field that Load refuses. Callers print it
// as is: it names the field, never its value, so no credential leaks into a
// status condition or an event.
type FieldError struct {
	// Field is the path of the refused field in the kubeconfig, such as
	// users[admin].exec or clusters[prod].certificate-authority.
	Field string
	// Reason says why the field is refused and what to use instead.
	Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("kubeconfig field %s is refused: %s", e.Field, e.Reason)
}

// UnsupportedProviderError reports a kubeConfig ConfigMap whose provider is
// not one this package implements. Callers branch on it to stall the object
// rather than retry: no retry makes an unknown provider known.
type UnsupportedProviderError struct {
	// Provider is the ConfigMap's provider value.
	Provider string
}

func (e *UnsupportedProviderError) Error() string {
	return fmt.Sprintf("kubeConfig provider %q is not supported: only %q is", e.Provider, ProviderGeneric)
}

// WorkloadIdentityDisabledError reports a generic-provider kubeConfig
// ConfigMap while the operator has not enabled tokens on a tenant's
// request. Callers stall the object: no retry enables it.
type WorkloadIdentityDisabledError struct{}

func (e *WorkloadIdentityDisabledError) Error() string {
	return fmt.Sprintf("kubeConfig provider %q mints ServiceAccount tokens on the object's request, "+
		"which this engine does only when its operator enables it with --feature-gates=%s=true (as Flux's feature gate)",
		ProviderGeneric, FeatureObjectLevelWorkloadIdentity)
}

// FeatureObjectLevelWorkloadIdentity is Flux's name of the feature gate
// that lets objects ask for ServiceAccount tokens (the generic provider).
const FeatureObjectLevelWorkloadIdentity = "ObjectLevelWorkloadIdentity"
