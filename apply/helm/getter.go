package helm

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// restGetter is a genericclioptions.RESTClientGetter over a rest.Config, so
// that Helm shares the process's connection settings instead of reading a
// kubeconfig file. One getter serves every release of one identity: its
// discovery cache and REST mapper are safe for concurrent use and are what
// makes many small releases cheap.
type restGetter struct {
	cfg       *rest.Config
	discovery *sharedDiscovery
	mapper    meta.ResettableRESTMapper
}

var _ genericclioptions.RESTClientGetter = (*restGetter)(nil)

func newRESTGetter(cfg *rest.Config) (*restGetter, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cached := memory.NewMemCacheClient(dc)
	return &restGetter{
		cfg:       cfg,
		discovery: &sharedDiscovery{CachedDiscoveryInterface: cached},
		// The mapper invalidates the real cache when it is reset (after
		// CRDs are installed, or when a kind is not found), not the
		// rate-limited view Helm's actions get.
		mapper: &refreshingMapper{ResettableRESTMapper: restmapper.NewDeferredDiscoveryRESTMapper(cached)},
	}, nil
}

func (g *restGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }

func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.discovery, nil
}

func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) { return g.mapper, nil }

// ToRawKubeConfigLoader is only asked for a default namespace; Helm's
// client always gets an explicit one, so an empty config is enough.
func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(), &clientcmd.ConfigOverrides{})
}
