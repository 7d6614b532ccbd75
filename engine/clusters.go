package engine

import (
	"context"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cozystack/cozy-aio/engine/cluster"
	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/engine/internal/targets"
	"github.com/cozystack/cozy-aio/internal/egress"
)

// destinations is the destination policy of tenant-chosen addresses.
func (e *Engine) destinations() egress.Policy {
	return egress.Policy{Allow: e.opts.Destinations.Allow, Deny: e.opts.Destinations.Deny}
}

// sourceDial dials every connection of the sources' fetchers (Git, OCI,
// Helm repositories, buckets) through the destination policy's source
// class: their URLs are the tenants' to write. The timeouts are net/http's.
func (e *Engine) sourceDial() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return e.destinations().Dialer(egress.Source, &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
}

// registerClusters exports the remote clusters in registry; a later engine
// in the same process takes the place of an earlier one.
func registerClusters(registry prometheus.Registerer, c *cluster.Registry[*targets.Clients]) error {
	return frame.RegisterReplacing(registry, targets.NewCollector(c))
}
