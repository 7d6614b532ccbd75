// Package cluster turns a HelmRelease's or Kustomization's spec.kubeConfig
// (meta.KubeConfigReference) into a rest.Config for the remote cluster the
// object deploys to.
//
// A kubeconfig in a tenant's Secret is untrusted input: Load refuses exec
// and auth-provider plugins, references to local files and disabled TLS
// verification anywhere in the file, and returns a sanitised config that
// carries only what a remote client needs. It does no I/O.
//
//	data, err := cluster.KubeconfigFromSecret(secret, ref.SecretRef.Key)
//	if err != nil { … }
//	cfg, err := cluster.Load(data, cluster.LoadOptions{UserAgent: "cozy-aio"})
//	var refused *cluster.FieldError
//	if errors.As(err, &refused) { … refused.Field names the kubeconfig field }
//
// A configMapRef with the generic provider (Flux 2.6+) names a remote API
// server address and a ServiceAccount of the object's namespace; GenericConfig
// asks the management cluster for a token of that ServiceAccount with the
// ConfigMap's audiences and uses it as the bearer token toward the address:
//
//	cfg, err := cluster.GenericConfig(ctx, mgmtClient, obj.Namespace, configMap, cluster.LoadOptions{})
//
// A Registry keeps what a caller builds for each cluster (the engine: a
// Helm manager with its clients and waiter), so that reconciles share one
// client per cluster instead of building one each time. It is keyed by the
// kubeconfig's content, so a rotated Secret gives a new entry; entries no
// reconcile used for a while are dropped and their connections closed; the
// local cluster is the entry of a nil reference:
//
//	reg, _ := cluster.NewRegistry(apiReader, mgmtClient, cluster.RegistryOptions[*helm.Manager]{Local: local, Build: build})
//	c, err := reg.Get(ctx, obj.Namespace, obj.Spec.KubeConfig) // c.Value, c.Source ("Secret ns/name")
package cluster
