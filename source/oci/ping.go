package oci

import (
	"context"
	"fmt"

	"oras.land/oras-go/v2/registry/remote"
)

// Ping checks that the registry of repoURL ("oci://host/path") answers
// its API endpoint with opts.Registry's transport and credentials.
func Ping(ctx context.Context, repoURL string, opts Options) error {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	repo, release, err := repository(repoURL+"/ping", opts.Registry)
	if err != nil {
		return err
	}
	defer release()
	reg, err := remoteRegistry(repo)
	if err != nil {
		return err
	}
	if err := reg.Ping(ctx); err != nil {
		return fetcher.Classify(ctx, repoURL, fmt.Errorf("ping: %w", err))
	}
	return nil
}

// remoteRegistry returns a registry client sharing repo's transport and
// credentials.
func remoteRegistry(repo *remote.Repository) (*remote.Registry, error) {
	reg, err := remote.NewRegistry(repo.Reference.Registry)
	if err != nil {
		return nil, err
	}
	reg.PlainHTTP = repo.PlainHTTP
	reg.Client = repo.Client
	return reg, nil
}
