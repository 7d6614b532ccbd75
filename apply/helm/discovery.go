package helm

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
)

// discoveryTTL bounds how stale the server's version and API groups may be
// when Helm asks for them. An invalidation by the REST mapper (after Helm
// or cozy-aio installs CRDs) still takes effect at once.
const discoveryTTL = 5 * time.Second

// sharedDiscovery is the discovery client Helm's actions see: Helm
// invalidates the cache at the start of every action to read the server's
// capabilities; here that happens at most once per discoveryTTL across
// all actions, and the server version is cached as long.
type sharedDiscovery struct {
	discovery.CachedDiscoveryInterface

	mu          sync.Mutex
	invalidated time.Time
	version     *version.Info
	versionAt   time.Time
}

func (d *sharedDiscovery) Invalidate() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if time.Since(d.invalidated) < discoveryTTL {
		return
	}
	d.invalidated = time.Now()
	d.CachedDiscoveryInterface.Invalidate()
}

func (d *sharedDiscovery) ServerVersion() (*version.Info, error) {
	d.mu.Lock()
	if d.version != nil && time.Since(d.versionAt) < discoveryTTL {
		v := *d.version
		d.mu.Unlock()
		return &v, nil
	}
	d.mu.Unlock()
	v, err := d.CachedDiscoveryInterface.ServerVersion()
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.version, d.versionAt = v, time.Now()
	d.mu.Unlock()
	c := *v
	return &c, nil
}
