package engine

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-aio/engine/crds"
)

// installCRDs installs the CRDs at start: all that differ when alone; with
// replicas, the missing ones now and the ones that differ once this replica
// leads.
func (e *Engine) installCRDs(ctx context.Context) error {
	withLog := func(ctx context.Context) context.Context { return logr.NewContext(ctx, e.log().WithName("crds")) }
	if e.replicas == nil {
		return InstallCRDs(withLog(ctx), e.cfg, e.opts.FieldManager)
	}
	if err := InstallMissingCRDs(withLog(ctx), e.cfg, e.opts.FieldManager); err != nil {
		return err
	}
	return e.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return InstallCRDs(withLog(ctx), e.cfg, e.opts.FieldManager)
	}))
}

// CRDDigestAnnotation records, on each CRD InstallCRDs applies, the digest
// of what it applied: a later start applies only the CRDs whose digest
// differs, which spares the API server six large no-op applies per start.
const CRDDigestAnnotation = crds.DigestAnnotation

// InstallCRDs server-side applies the embedded Flux CRDs that are missing
// or differ from the embedded ones, and waits until those are Established
// and served. It reads only the CRDs' metadata and applies one CRD at a
// time: a CRD decodes into a large tree, and this runs at every start. An
// empty fieldManager is apply.DefaultFieldManager, the engine's default.
//
// A live CRD newer than the embedded one, which has stored objects in a
// version the embedded CRD does not list (the API server would refuse the
// update), is left as it is and logged to ctx's logger
// (controller-runtime's log.FromContext): a cozy-aio rolled back to an
// older binary starts on the CRDs the newer one installed.
func InstallCRDs(ctx context.Context, cfg *rest.Config, fieldManager string) error {
	return crds.Install(ctx, cfg, fieldManager, false)
}

// InstallMissingCRDs installs the embedded CRDs that do not exist yet and
// leaves the others as they are. A replica that may not lead runs it at
// start, so that its informers can start; the leader then updates the
// CRDs that differ (InstallCRDs), and replicas of different versions do
// not take turns rewriting them.
func InstallMissingCRDs(ctx context.Context, cfg *rest.Config, fieldManager string) error {
	return crds.Install(ctx, cfg, fieldManager, true)
}
