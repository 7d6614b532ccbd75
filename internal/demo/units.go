package demo

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/internal/status"
)

// Unit is one Flux object the demo watches, as last seen.
type Unit = status.Unit

// Kinds are the kinds the demo counts, in the order it prints them.
var Kinds = status.Kinds

// Count is Ready out of Total units of one kind.
type Count = status.Count

// listUnits reads every unit of every kind.
func listUnits(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]Unit, error) {
	return status.ListUnits(ctx, c, opts...)
}

func countUnits(units []Unit) []Count { return status.CountUnits(units) }
