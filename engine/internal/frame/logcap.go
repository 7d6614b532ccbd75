package frame

import "github.com/go-logr/logr"

// maxLogVerbosity is the most verbose level the engine's logger passes on.
// client-go logs the body of every request and response at V(8) and above
// through the logger in the request's context (the reconcile's): the
// manifests applied, with values substituted from Secrets, and the Secrets
// the engine reads for credentials. No logger the engine is given ever
// receives them.
const maxLogVerbosity = 7

// capVerbosity returns l without its levels above maxLogVerbosity.
func CapVerbosity(l logr.Logger) logr.Logger {
	if l.GetSink() == nil {
		return l
	}
	if _, ok := l.GetSink().(cappedSink); ok {
		return l
	}
	return logr.New(cappedSink{l.GetSink()})
}

// cappedSink drops the Info calls above maxLogVerbosity.
type cappedSink struct{ logr.LogSink }

func (s cappedSink) Enabled(level int) bool {
	return level <= maxLogVerbosity && s.LogSink.Enabled(level)
}

func (s cappedSink) Info(level int, msg string, kv ...any) {
	if level <= maxLogVerbosity {
		s.LogSink.Info(level, msg, kv...)
	}
}

func (s cappedSink) WithValues(kv ...any) logr.LogSink {
	return cappedSink{s.LogSink.WithValues(kv...)}
}

func (s cappedSink) WithName(name string) logr.LogSink { return cappedSink{s.LogSink.WithName(name)} }

// WithCallDepth keeps the caller's file and line right when the wrapped
// sink reports them.
func (s cappedSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return cappedSink{cd.WithCallDepth(depth)}
	}
	return s
}

var _ logr.CallDepthLogSink = cappedSink{}
