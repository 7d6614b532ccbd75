package helm

import (
	"errors"
	"fmt"
	"sync"

	ri "helm.sh/helm/v4/pkg/release"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
)

// memoDriver reads a release's revisions once per session (the session
// holds the release's lock, so nothing else in the process writes them)
// and answers Helm's repeated history and "deployed" queries from memory.
// Writes go to the API server first and then update the memory.
type memoDriver struct {
	driver.Driver

	mu     sync.Mutex
	loaded map[string][]*releasev1.Release // by release name
	// unreadable are the releases with a record too large to read, by
	// name: asked again in the session, the answer would be the same,
	// inflated again up to the limit.
	unreadable map[string]error

	// none, when set, tells that a release has no record without a
	// request (Cache); wrote notes a record written.
	none  func(name string) bool
	wrote func(name string, version int)
}

func newMemoDriver(d driver.Driver) *memoDriver {
	return &memoDriver{Driver: d, loaded: map[string][]*releasev1.Release{}, unreadable: map[string]error{}}
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
	if err := d.unreadable[name]; err != nil {
		return nil, err
	}
	if d.none != nil && d.none(name) {
		d.loaded[name] = []*releasev1.Release{}
		return d.loaded[name], nil
	}
	rs, err := d.Driver.Query(map[string]string{"name": name, "owner": "helm"})
	if tooLarge := (*RecordTooLargeError)(nil); errors.As(err, &tooLarge) {
		d.unreadable[name] = err
	}
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
		if r, ok := rls.(*releasev1.Release); ok && errors.Is(err, driver.ErrReleaseExists) && d.wrote != nil {
			// Someone else wrote it: the release has records, whatever
			// a watch that has not seen them yet says.
			d.wrote(r.Name, r.Version)
		}
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
	if d.wrote != nil {
		d.wrote(r.Name, r.Version)
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
