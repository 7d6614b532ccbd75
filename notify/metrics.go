package notify

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

type metrics struct {
	results     *prometheus.CounterVec
	queued      *prometheus.GaugeVec
	rateLimited prometheus.Counter
	webhooks    *prometheus.CounterVec
}

func newMetrics(r prometheus.Registerer) *metrics {
	m := &metrics{
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cozy_aio_notifications_total",
			Help: "Events per Provider by result: sent, failed (after retries, or the Provider is unusable), retried, dropped (queue full).",
		}, []string{"provider", "result"}),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cozy_aio_notification_queue_length",
			Help: "Events waiting in each Provider's queue.",
		}, []string{"provider"}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cozy_aio_notifications_rate_limited_total",
			Help: "Events not sent because the same event for the same object was sent within the rate limit interval.",
		}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cozy_aio_webhook_requests_total",
			Help: "Receiver webhook requests by HTTP status code and reason.",
		}, []string{"code", "reason"}),
	}
	if r != nil {
		m.results = register(r, m.results)
		m.queued = register(r, m.queued)
		m.rateLimited = register(r, m.rateLimited)
		m.webhooks = register(r, m.webhooks)
	}
	return m
}

// register registers c, or returns the collector already registered under
// its name (several engines may share a registry).
func register[C prometheus.Collector](r prometheus.Registerer, c C) C {
	if err := r.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

func (m *metrics) result(provider types.NamespacedName, result string) {
	m.results.WithLabelValues(provider.String(), result).Inc()
}
