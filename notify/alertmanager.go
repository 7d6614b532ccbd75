package notify

import (
	"context"
	"net/http"
	"strings"
	"time"
	"unicode"
)

// alertmanager posts one alert per event to Alertmanager's v2 API
// (address: http://alertmanager:9093/api/v2/alerts). Labels identify the
// object and the reason; the message and summary are annotations. An
// info event is sent already resolved (endsAt = startsAt).
type alertmanager struct {
	c                         *httpClient
	url                       string
	username, password, token string
}

type amAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       *time.Time        `json:"endsAt,omitempty"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

func (a *alertmanager) post(ctx context.Context, ev *Event) error {
	o := ev.InvolvedObject
	labels := map[string]string{
		"alertname": "Flux" + o.Kind + upperFirst(ev.Reason),
		"severity":  ev.Severity,
		"reason":    ev.Reason,
		"kind":      o.Kind,
		"name":      o.Name,
		"namespace": o.Namespace,
	}
	ann := map[string]string{"message": ev.Message}
	for k, v := range ev.Metadata {
		if k == "summary" {
			ann[k] = v
			continue
		}
		if _, ok := labels[k]; !ok {
			labels[k] = v
		}
	}
	start := ev.Timestamp.Time
	if start.IsZero() {
		start = time.Now()
	}
	al := amAlert{Labels: labels, Annotations: ann, StartsAt: start.UTC()}
	if ev.Severity != SeverityError {
		end := al.StartsAt
		al.EndsAt = &end
	}
	return a.c.postJSON(ctx, a.url, []amAlert{al}, func(r *http.Request, _ []byte) {
		switch {
		case a.token != "":
			r.Header.Set("Authorization", "Bearer "+a.token)
		case a.username != "":
			r.SetBasicAuth(a.username, a.password)
		}
	})
}

func upperFirst(s string) string {
	for i, r := range s {
		return string(unicode.ToUpper(r)) + s[i+len(string(r)):]
	}
	return strings.TrimSpace(s)
}
