package helm

import (
	"errors"
	"testing"

	ri "helm.sh/helm/v4/pkg/release"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
)

// countingDriver counts the queries that reach the API server's driver.
type countingDriver struct {
	driver.Driver
	queries int
}

func (d *countingDriver) Query(l map[string]string) ([]ri.Releaser, error) {
	d.queries++
	return d.Driver.Query(l)
}

func rev(name string, v int, st rcommon.Status) *releasev1.Release {
	return &releasev1.Release{Name: name, Version: v, Namespace: "ns", Info: &releasev1.Info{Status: st}}
}

func TestMemoDriverAnswersHistoryFromOneQuery(t *testing.T) {
	under := &countingDriver{Driver: driver.NewMemory()}
	for _, r := range []*releasev1.Release{rev("app", 1, rcommon.StatusSuperseded), rev("app", 2, rcommon.StatusDeployed), rev("other", 1, rcommon.StatusDeployed)} {
		if err := under.Create(releaseKey(r), r); err != nil {
			t.Fatal(err)
		}
	}
	s := storage.Init(newMemoDriver(under))
	for range 3 {
		h, err := s.History("app")
		if err != nil || len(h) != 2 {
			t.Fatalf("History = %v, %v", h, err)
		}
		d, err := s.Deployed("app")
		if err != nil || d.(*releasev1.Release).Version != 2 {
			t.Fatalf("Deployed = %v, %v", d, err)
		}
	}
	if under.queries != 1 {
		t.Fatalf("%d queries reached the driver, want 1", under.queries)
	}
	// A caller changing a returned revision does not change the memory;
	// an Update does, and reaches the driver.
	last, _ := s.Last("app")
	last.(*releasev1.Release).Info.Status = rcommon.StatusFailed
	if d, _ := s.Deployed("app"); d == nil {
		t.Fatal("a change without Update leaked into the memory")
	}
	if err := s.Update(last); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Deployed("app"); !errors.Is(err, driver.ErrNoDeployedReleases) {
		t.Fatalf("after the Update, Deployed = %v, want none", err)
	}
	if got, _ := under.Get(releaseKey(rev("app", 2, ""))); got.(*releasev1.Release).Info.Status != rcommon.StatusFailed {
		t.Fatal("the Update did not reach the driver")
	}
	// A new revision is remembered; a deleted one forgotten.
	if err := s.Create(rev("app", 3, rcommon.StatusPendingUpgrade)); err != nil {
		t.Fatal(err)
	}
	if h, _ := s.History("app"); len(h) != 3 {
		t.Fatalf("after Create, %d revisions", len(h))
	}
	if _, err := s.Delete("app", 1); err != nil {
		t.Fatal(err)
	}
	if h, _ := s.History("app"); len(h) != 2 {
		t.Fatalf("after Delete, %d revisions", len(h))
	}
	// A release with no revision is "not found", as from the driver.
	if _, err := s.History("missing"); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Fatalf("History(missing) = %v", err)
	}
	if under.queries != 2 {
		t.Fatalf("%d queries reached the driver, want 2 (app, missing)", under.queries)
	}
}
