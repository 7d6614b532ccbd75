package helm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/kube"
	ri "helm.sh/helm/v4/pkg/release"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/discovery"

	"github.com/cozystack/cozy-aio/health"
)

// This file keeps a release's Helm action to the API requests it needs.
// Measured on 1,000 small releases, Helm's defaults cost 23 requests per
// release: six lists of the release's Secrets, discovery (/api, /apis and
// /version, twice) because every action invalidates the discovery cache,
// and a watch per kind to wait for objects that are ready the moment they
// exist. Each saving below keeps Helm's semantics.

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

// kubeClient is Helm's kube client with a reachability check that shares
// the cached server version, and waits that skip objects kstatus reports
// Current as soon as they exist.
type kubeClient struct {
	*kube.Client
	discovery *sharedDiscovery
	// ctx and health, when set, serve Wait with cozy-aio's event-driven
	// kstatus waiter: it computes each object's status from the object
	// alone, where kstatus's Deployment reader also lists the ReplicaSets
	// and Pods on every event (nine requests per release in the demo).
	ctx    context.Context
	health *health.Waiter
	// stopped, when set, is the refusal that stopped the session's writes
	// of release records (see recordFence).
	stopped func() error
}

var _ kube.InterfaceWaitOptions = kubeClient{}

// Delete refuses to delete the release's objects once a write of its
// records was refused: Helm's uninstall only logs a failed write of the
// uninstalling record and goes on deleting, and a failed upgrade or
// rollback deletes what it created (CleanupOnFail), which may by then be
// the new holder's.
func (k kubeClient) Delete(resources kube.ResourceList, policy metav1.DeletionPropagation) (*kube.Result, []error) {
	if k.stopped != nil {
		if err := k.stopped(); err != nil {
			return &kube.Result{}, []error{fmt.Errorf("not deleting the release's objects: %w", err)}
		}
	}
	return k.Client.Delete(resources, policy)
}

func (k kubeClient) IsReachable() error {
	if _, err := k.discovery.ServerVersion(); err != nil {
		return fmt.Errorf("kubernetes cluster unreachable: %w", err)
	}
	return nil
}

func (k kubeClient) GetWaiter(ws kube.WaitStrategy) (kube.Waiter, error) {
	w, err := k.Client.GetWaiter(ws)
	if err != nil {
		return nil, err
	}
	return k.wrap(ws, w), nil
}

func (k kubeClient) GetWaiterWithOptions(ws kube.WaitStrategy, opts ...kube.WaitOption) (kube.Waiter, error) {
	w, err := k.Client.GetWaiterWithOptions(ws, opts...)
	if err != nil {
		return nil, err
	}
	return k.wrap(ws, w), nil
}

func (k kubeClient) wrap(ws kube.WaitStrategy, w kube.Waiter) kube.Waiter {
	r := readyWhenApplied{Waiter: w}
	if ws == kube.StatusWatcherStrategy && k.health != nil {
		r.ctx, r.health = k.ctx, k.health
	}
	return r
}

// readyWhenApplied waits only for the objects whose readiness kstatus
// reads from their status; the others (ConfigMaps, Secrets, RBAC, a
// ClusterIP Service…) are Current the moment they exist, which the apply
// that precedes the wait has just shown. Deletion and hook waits are
// unchanged.
type readyWhenApplied struct {
	kube.Waiter
	ctx    context.Context
	health *health.Waiter
}

func (w readyWhenApplied) Wait(rl kube.ResourceList, timeout time.Duration) error {
	return w.wait(rl, timeout, false)
}

func (w readyWhenApplied) WaitWithJobs(rl kube.ResourceList, timeout time.Duration) error {
	return w.wait(rl, timeout, true)
}

// wait waits for the objects that need it; without jobs, Jobs are not
// waited for (Helm's Wait and WaitWithJobs).
func (w readyWhenApplied) wait(rl kube.ResourceList, timeout time.Duration, jobs bool) error {
	rest := needsWait(rl)
	if len(rest) == 0 {
		return nil
	}
	fallback := func() error {
		if jobs {
			return w.Waiter.WaitWithJobs(rest, timeout)
		}
		return w.Waiter.Wait(rest, timeout)
	}
	if w.health == nil {
		return fallback()
	}
	var refs []health.ObjectRef
	for _, info := range rest {
		u, err := asUnstructured(info)
		if err != nil {
			return fallback()
		}
		// As Helm's waiter: a paused Deployment is not waited for.
		if paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused"); paused && u.GetKind() == "Deployment" {
			continue
		}
		if !jobs && u.GroupVersionKind().GroupKind() == (schema.GroupKind{Group: "batch", Kind: "Job"}) {
			continue
		}
		ref := health.RefOf(u)
		if ref.Namespace == "" {
			ref.Namespace = info.Namespace
		}
		refs = append(refs, ref)
	}
	if len(refs) == 0 {
		return nil
	}
	if timeout <= 0 {
		timeout = kube.DefaultStatusWatcherTimeout
	}
	report, err := w.health.Wait(w.ctx, refs, health.WaitOptions{Timeout: timeout})
	if err == nil {
		return nil
	}
	var errs []error
	for _, o := range report.NotReady() {
		errs = append(errs, fmt.Errorf("resource %s/%s/%s not ready. status: %s, message: %s",
			o.Object.Kind, o.Object.Namespace, o.Object.Name, o.Status, o.Message))
	}
	return errors.Join(append(errs, err)...)
}

// currentOnceApplied are the kinds without a status that kstatus reads:
// they are Current whenever they exist.
var currentOnceApplied = map[string]bool{
	"/ConfigMap": true, "/Secret": true, "/ServiceAccount": true,
	"/LimitRange": true, "/Endpoints": true,
	"rbac.authorization.k8s.io/Role": true, "rbac.authorization.k8s.io/RoleBinding": true,
	"rbac.authorization.k8s.io/ClusterRole": true, "rbac.authorization.k8s.io/ClusterRoleBinding": true,
	"scheduling.k8s.io/PriorityClass": true, "storage.k8s.io/StorageClass": true,
	"networking.k8s.io/IngressClass": true, "node.k8s.io/RuntimeClass": true,
}

func needsWait(rl kube.ResourceList) kube.ResourceList {
	var out kube.ResourceList
	for _, info := range rl {
		if info == nil || info.Object == nil {
			out = append(out, info)
			continue
		}
		gvk := gvkOf(info)
		key := gvk.Group + "/" + gvk.Kind
		if currentOnceApplied[key] {
			continue
		}
		// A Service is Current at once unless it waits for a load balancer.
		if key == "/Service" {
			if u, err := asUnstructured(info); err == nil {
				if t, _, _ := unstructured.NestedString(u.Object, "spec", "type"); t != "LoadBalancer" {
					continue
				}
			}
		}
		out = append(out, info)
	}
	return out
}

// gvkOf is the kind of a built object: from its REST mapping, as typed
// objects decoded by Helm's builder may carry no TypeMeta.
func gvkOf(info *resource.Info) schema.GroupVersionKind {
	if info.Mapping != nil {
		return info.Mapping.GroupVersionKind
	}
	return info.Object.GetObjectKind().GroupVersionKind()
}

// asUnstructured returns a built object as unstructured, with its kind.
func asUnstructured(info *resource.Info) (*unstructured.Unstructured, error) {
	if info == nil || info.Object == nil {
		return nil, errors.New("no object")
	}
	if u, ok := info.Object.(*unstructured.Unstructured); ok {
		if u.GetKind() == "" {
			u = u.DeepCopy()
			u.SetGroupVersionKind(gvkOf(info))
		}
		return u, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(info.Object)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvkOf(info))
	if u.GetNamespace() == "" {
		u.SetNamespace(info.Namespace)
	}
	if u.GetName() == "" {
		u.SetName(info.Name)
	}
	return u, nil
}

// memoDriver reads a release's revisions once per session (the session
// holds the release's lock, so nothing else in the process writes them)
// and answers Helm's repeated history and "deployed" queries from memory.
// Writes go to the API server first and then update the memory.
type memoDriver struct {
	driver.Driver

	mu     sync.Mutex
	loaded map[string][]*releasev1.Release // by release name
}

func newMemoDriver(d driver.Driver) *memoDriver {
	return &memoDriver{Driver: d, loaded: map[string][]*releasev1.Release{}}
}

// byName reports whether the query is one the memory answers: the
// release's revisions, optionally of one status.
func byName(labels map[string]string) (name, status string, ok bool) {
	name, ok = labels["name"]
	if !ok || labels["owner"] != "helm" {
		return "", "", false
	}
	for k := range labels {
		if k != "name" && k != "owner" && k != "status" {
			return "", "", false
		}
	}
	return name, labels["status"], true
}

func (d *memoDriver) Query(labels map[string]string) ([]ri.Releaser, error) {
	name, status, ok := byName(labels)
	if !ok {
		return d.Driver.Query(labels)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	revs, err := d.load(name)
	if err != nil {
		return nil, err
	}
	var out []ri.Releaser
	for _, r := range revs {
		if status == "" || (r.Info != nil && string(r.Info.Status) == status) {
			out = append(out, shallowCopy(r))
		}
	}
	if len(out) == 0 {
		return nil, driver.ErrReleaseNotFound
	}
	return out, nil
}

// load reads every revision of a release once; d.mu is held.
func (d *memoDriver) load(name string) ([]*releasev1.Release, error) {
	if revs, ok := d.loaded[name]; ok {
		return revs, nil
	}
	rs, err := d.Driver.Query(map[string]string{"name": name, "owner": "helm"})
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, err
	}
	revs := make([]*releasev1.Release, 0, len(rs))
	for _, r := range rs {
		if rel, ok := r.(*releasev1.Release); ok {
			revs = append(revs, rel)
		}
	}
	d.loaded[name] = revs
	return revs, nil
}

func (d *memoDriver) Get(key string) (ri.Releaser, error) {
	d.mu.Lock()
	for _, revs := range d.loaded {
		for _, r := range revs {
			if releaseKey(r) == key {
				d.mu.Unlock()
				return shallowCopy(r), nil
			}
		}
	}
	d.mu.Unlock()
	return d.Driver.Get(key)
}

func (d *memoDriver) Create(key string, rls ri.Releaser) error {
	if err := d.Driver.Create(key, rls); err != nil {
		return err
	}
	d.remember(rls)
	return nil
}

func (d *memoDriver) Update(key string, rls ri.Releaser) error {
	if err := d.Driver.Update(key, rls); err != nil {
		return err
	}
	d.remember(rls)
	return nil
}

func (d *memoDriver) Delete(key string) (ri.Releaser, error) {
	r, err := d.Driver.Delete(key)
	if err != nil {
		return r, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, revs := range d.loaded {
		for i, rev := range revs {
			if releaseKey(rev) == key {
				d.loaded[name] = append(revs[:i:i], revs[i+1:]...)
				return r, nil
			}
		}
	}
	return r, nil
}

// remember records a written revision when its release is in memory.
func (d *memoDriver) remember(rls ri.Releaser) {
	r, ok := rls.(*releasev1.Release)
	if !ok {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	revs, ok := d.loaded[r.Name]
	if !ok {
		return
	}
	c := shallowCopy(r)
	for i, rev := range revs {
		if rev.Version == r.Version {
			revs[i] = c
			return
		}
	}
	d.loaded[r.Name] = append(revs, c)
}

// shallowCopy copies a revision and its Info, so that a caller changing
// a returned revision's status does not change the memory behind Helm's
// back; only an Update does.
func shallowCopy(r *releasev1.Release) *releasev1.Release {
	c := *r
	if r.Info != nil {
		info := *r.Info
		c.Info = &info
	}
	return &c
}

func releaseKey(r *releasev1.Release) string {
	return fmt.Sprintf("sh.helm.release.v1.%s.v%d", r.Name, r.Version)
}
