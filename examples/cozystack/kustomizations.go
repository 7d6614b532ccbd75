package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/internal/switchover"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

var (
	ksGVR        = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
	helmRepoGVR  = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "helmrepositories"}
	generatorGVR = schema.GroupVersionResource{Group: "source.extensions.fluxcd.io", Version: "v1beta1", Resource: "artifactgenerators"}
)

// createWorkload pushes the switch-over workload's charts and manifests
// and creates its HelmReleases and Kustomizations (internal/switchover).
func createWorkload(ctx context.Context, cfg *rest.Config, reg *testenv.Registry, releases, kustomizations int) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	digest, err := switchover.Push(ctx, reg, kustomizations)
	if err != nil {
		return err
	}
	return switchover.Create(ctx, c, switchover.Options{Host: reg.Host(), AppsDigest: digest}, releases, kustomizations)
}

// record writes the fixtures of what the engine that ran left
// (switchover.Record): the first 20 HelmReleases and 2 Kustomizations.
func record(ctx context.Context, cfg *rest.Config, path, command string) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	return writeFixtures(path, command, func(w io.Writer) error { return switchover.Record(ctx, c, w, switchover.ReleasesPerNS, 2) })
}

// createTroubled pushes the troubled chart and creates the troubled
// releases (switchover.CreateTroubled).
func createTroubled(ctx context.Context, cfg *rest.Config, reg *testenv.Registry) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	if err := switchover.PushTroubled(ctx, reg); err != nil {
		return err
	}
	return switchover.CreateTroubled(ctx, c, switchover.Options{Host: reg.Host()})
}

// trouble brings the troubled releases to their states
// (switchover.Trouble) and, given a path, writes their fixtures there.
func trouble(ctx context.Context, cfg *rest.Config, path, command string) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	if err := switchover.Trouble(ctx, c, 5*time.Minute); err != nil {
		return err
	}
	if path == "" {
		return nil
	}
	return writeFixtures(path, command, func(w io.Writer) error { return switchover.RecordTroubled(ctx, c, w) })
}

// writeFixtures writes fixtures to path, after a header with the command
// that recorded them.
func writeFixtures(path, command string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(f, "# Recorded by examples/cozystack with Flux's controllers (make switch-over builds them):\n#   %s\n", command)
	return write(f)
}

// waitKustomizations waits until every Kustomization is Ready.
func waitKustomizations(ctx context.Context, dyn dynamic.Interface, timeout time.Duration, say func(string, ...any)) error {
	var notReady []string
	err := waitFor(ctx, timeout, "every Kustomization Ready", func() (bool, error) {
		list, err := dyn.Resource(ksGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		notReady = notReady[:0]
		for _, ks := range list.Items {
			if s, _ := readyOf(&ks); s != "True" {
				notReady = append(notReady, ks.GetNamespace()+"/"+ks.GetName())
			}
		}
		return len(notReady) == 0, nil
	})
	if err != nil {
		say("Kustomizations not Ready: %s", strings.Join(notReady, ", "))
	}
	return err
}

// acceptanceRelease tells whether a HelmRelease is one of -helmreleases,
// which report() sums up instead of listing.
func acceptanceRelease(u *unstructured.Unstructured) bool {
	return strings.HasPrefix(u.GetNamespace(), switchover.ReleasesPrefix)
}
