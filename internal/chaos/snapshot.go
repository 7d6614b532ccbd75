package chaos

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"helm.sh/helm/v4/pkg/release"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReadSnapshot reads what Check needs from the API server: the units and
// sources, every Helm release record (decoded by Helm's own storage
// driver) and the ConfigMaps of namespaces.
func ReadSnapshot(ctx context.Context, c client.Reader, secrets driver.Driver, namespaces []string) (Snapshot, error) {
	var s Snapshot
	var hrs helmv2.HelmReleaseList
	var ks kustomizev1.KustomizationList
	var gits sourcev1.GitRepositoryList
	var ocis sourcev1.OCIRepositoryList
	for _, l := range []client.ObjectList{&hrs, &ks, &gits, &ocis} {
		if err := c.List(ctx, l); err != nil {
			return s, err
		}
	}
	s.HelmReleases, s.Kustomizations, s.GitRepositories, s.OCIRepositories = hrs.Items, ks.Items, gits.Items, ocis.Items
	rels, err := secrets.List(func(release.Releaser) bool { return true })
	if err != nil && !strings.Contains(err.Error(), "not found") {
		return s, fmt.Errorf("listing release records: %w", err)
	}
	for _, r := range rels {
		if r, ok := r.(*releasev1.Release); ok {
			s.Releases = append(s.Releases, r)
		}
	}
	for _, ns := range namespaces {
		var cms corev1.ConfigMapList
		if err := c.List(ctx, &cms, client.InNamespace(ns)); err != nil {
			return s, err
		}
		for _, cm := range cms.Items {
			s.Objects = append(s.Objects, Object{Kind: "ConfigMap", Namespace: cm.Namespace, Name: cm.Name, Labels: cm.Labels})
		}
	}
	return s, nil
}

// Leak is a planted credential found where it must never be.
type Leak struct {
	// Where: "log", "event", "status", "metrics".
	Where, Detail string
}

// ScanLeaks looks for every planted secret in cozy-aio's log, the Events,
// the units' status messages and cozy-aio's /metrics.
func ScanLeaks(ctx context.Context, c client.Reader, logPath, healthAddr string, snap Snapshot, secrets []string) ([]Leak, error) {
	var leaks []Leak
	find := func(where, what, text string) {
		for _, s := range secrets {
			if s != "" && strings.Contains(text, s) {
				leaks = append(leaks, Leak{Where: where, Detail: what})
			}
		}
	}
	if b, err := os.ReadFile(logPath); err == nil {
		for i, line := range strings.Split(string(b), "\n") {
			find("log", fmt.Sprintf("%s line %d", logPath, i+1), line)
		}
	} else {
		return nil, err
	}
	var events corev1.EventList
	if err := c.List(ctx, &events); err != nil {
		return nil, err
	}
	for _, ev := range events.Items {
		find("event", fmt.Sprintf("Event %s/%s (%s)", ev.Namespace, ev.Name, ev.Reason), ev.Message)
	}
	status := func(kind, ns, name string, v any) {
		find("status", kind+" "+ns+"/"+name, fmt.Sprintf("%+v", v))
	}
	for _, o := range snap.HelmReleases {
		status("HelmRelease", o.Namespace, o.Name, o.Status)
	}
	for _, o := range snap.Kustomizations {
		status("Kustomization", o.Namespace, o.Name, o.Status)
	}
	for _, o := range snap.GitRepositories {
		status("GitRepository", o.Namespace, o.Name, o.Status)
	}
	for _, o := range snap.OCIRepositories {
		status("OCIRepository", o.Namespace, o.Name, o.Status)
	}
	if healthAddr != "" {
		if text, err := readMetrics(ctx, healthAddr); err == nil {
			find("metrics", "/metrics", text)
		}
	}
	return leaks, nil
}

func readMetrics(ctx context.Context, addr string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
