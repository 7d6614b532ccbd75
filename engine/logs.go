package engine

import (
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/go-logr/logr"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine/internal/frame"
)

// log returns the engine's logger.
func (e *Engine) log() logr.Logger { return e.mgr.GetLogger() }

// logHelmSteps logs the end of each Helm action a reconcile ran, with the
// release and the revision it left.
func (e *Engine) logHelmSteps(self frame.Ref, rel helm.Release, res helm.Outcome, err error) {
	l := e.log().WithValues("controller", "helmrelease", "controllerKind", helmv2.HelmReleaseKind,
		"name", self.Name, "namespace", self.Namespace, "release", rel.Namespace+"/"+rel.Name)
	for _, s := range res.Steps {
		l.Info("Helm action finished", "action", string(s.Action), "revision", s.Revision)
	}
	if err != nil {
		l.Error(err, "Helm action failed", "revision", res.Release.Revision)
	}
}
