package engine

import (
	"github.com/go-logr/logr"
)

// log returns the engine's logger.
func (e *Engine) log() logr.Logger { return e.mgr.GetLogger() }
