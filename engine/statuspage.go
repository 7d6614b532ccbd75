package engine

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/internal/status"
	"github.com/cozystack/cozy-aio/internal/statuspage"
)

// StatusPageOptions configures the status page (docs/status-page.md).
type StatusPageOptions struct {
	// Addr is the page's listener. Default: "" (off). On a loopback
	// address everyone who reaches it sees everything; elsewhere each
	// request needs a Kubernetes bearer token, and shows what that user
	// may get.
	Addr string
	// Prefix serves the page under a path, behind a reverse proxy
	// ("/cozy-aio"). Default: the root.
	Prefix string
	// Nodes reports the nodes' network for the bootstrap view; the
	// bootstrap (bootstrap.Run) sets it.
	Nodes func(ctx context.Context) ([]StatusNode, error)
}

// StatusNode is one node's network as the status page shows it.
type StatusNode = statuspage.Node

// newStatusPage builds the page over the engine's cache, registry, plans
// and shards.
func (e *Engine) newStatusPage() (*statuspage.Server, error) {
	// Events and reviews go to the API server directly: the engine's
	// client would start an informer of every Event in the cluster.
	api, err := client.New(e.cfg, client.Options{Scheme: e.mgr.GetScheme(), Mapper: e.mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("status page: %w", err)
	}
	return statuspage.New(statuspage.Options{
		Addr: e.opts.StatusPage.Addr, Prefix: e.opts.StatusPage.Prefix, Logger: e.opts.Logger,
		Source: statuspage.Source{
			Cache: e.mgr.GetCache(), API: api, Metrics: e.registry,
			Plans: func(yield func(status.Plan) bool) {
				for _, ps := range []*frame.Plans{e.helmrelease.Plans(), e.kustomization.Plans()} {
					more := true
					ps.Each(func(p frame.PlanOf) bool {
						more = yield(status.Plan{Kind: p.Ref.Kind, Namespace: p.Ref.Namespace, Name: p.Ref.Name, Held: p.Held, At: p.At, Plan: p.Plan})
						return more
					})
					if !more {
						return
					}
				}
			},
			TenantOf: e.helmrelease.TenantOf,
			Queued:   e.pool.Queued,
			Item:     e.pool.Item,
			Pool:     e.pool.Stats,
			Replica: func() statuspage.Replica {
				r := e.Replica()
				return statuspage.Replica{ID: r.ID, Leader: r.Leader, Shards: r.Shards, Live: r.Live, Holders: r.Holders}
			},
			Nodes: e.opts.StatusPage.Nodes,
		},
	})
}

// addStatusPage serves the page on every replica when asked for.
func (e *Engine) addStatusPage() error {
	if e.opts.StatusPage.Addr == "" {
		return nil
	}
	p, err := e.newStatusPage()
	if err != nil {
		return err
	}
	e.statusPage = p
	return e.mgr.Add(frame.EveryReplica{Runnable: p})
}

// StatusPageURL returns the status page's address once it listens; empty
// when it is off or not started yet.
func (e *Engine) StatusPageURL() string {
	if e.statusPage == nil || e.statusPage.Addr() == "" {
		return ""
	}
	return e.statusPage.URL()
}

// StatusPageUpdates returns how many batches of changes the status page
// pushed to browsers.
func (e *Engine) StatusPageUpdates() uint64 {
	if e.statusPage == nil {
		return 0
	}
	return e.statusPage.Updates()
}
