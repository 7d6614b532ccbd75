package frame

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// apiUnavailableRetry is how soon a HelmRelease whose reconcile failed
// because the API server did not answer is tried again: Flux requeues
// such a failure with its rate limiter (from 750 ms), not at the next
// interval.
const APIUnavailableRetry = 5 * time.Second

// apiUnavailable tells whether err says the API server (or etcd behind
// it) did not answer, rather than refused what was asked: a connection
// refused or reset, a timeout, 429 or 503.
func APIUnavailable(err error) bool {
	return err != nil && (utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsTooManyRequests(err) || errors.Is(err, context.DeadlineExceeded))
}
