package bootstrap

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// preflightCheck is the result of one preflight check.
type preflightCheck struct {
	Name string
	Err  error
}

func (c preflightCheck) String() string {
	if c.Err == nil {
		return "preflight " + c.Name + ": ok"
	}
	return "preflight " + c.Name + ": " + c.Err.Error()
}

// preflightOptions configures preflight. The zero value checks the API
// and the permissions only.
type preflightOptions struct {
	// DataDir is checked for writability when set. Default: not checked.
	DataDir string
}

// preflightReport is the result of preflight, a line per check.
type preflightReport []preflightCheck

// Err returns nil when every check passed, else an error naming each
// failed check on its own line.
func (r preflightReport) Err() error {
	var failed []string
	for _, c := range r {
		if c.Err != nil {
			failed = append(failed, c.String())
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(failed, "\n"))
}

// preflight checks that cozy-aio can start: the API server answers, the
// identity may create CustomResourceDefinitions and Namespaces (asked with
// SelfSubjectAccessReviews), and the data directory is writable.
func preflight(ctx context.Context, cfg *rest.Config, c client.Client, opts preflightOptions) preflightReport {
	var r preflightReport
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err == nil {
		_, err = dc.ServerVersion()
	}
	r = append(r, preflightCheck{Name: "api-reachable", Err: wrapf(err, "API server %s", cfg.Host)})
	for _, res := range []authorizationv1.ResourceAttributes{
		{Verb: "create", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
		{Verb: "create", Resource: "namespaces"},
	} {
		r = append(r, preflightCheck{Name: "can-create-" + res.Resource, Err: canI(ctx, c, res)})
	}
	if opts.DataDir != "" {
		r = append(r, preflightCheck{Name: "data-dir-writable", Err: writable(opts.DataDir)})
	}
	return r
}

func canI(ctx context.Context, c client.Client, res authorizationv1.ResourceAttributes) error {
	review := &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &res},
	}
	if err := c.Create(ctx, review); err != nil {
		return fmt.Errorf("asking whether we may %s %s: %w", res.Verb, res.Resource, err)
	}
	if !review.Status.Allowed {
		why := review.Status.Reason
		if why == "" {
			why = "denied by RBAC"
		}
		return fmt.Errorf("not allowed to %s %s: %s", res.Verb, res.Resource, why)
	}
	return nil
}

func writable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("data directory %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".preflight-*")
	if err != nil {
		return fmt.Errorf("data directory %s is not writable: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(filepath.Clean(name))
}

func wrapf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}
