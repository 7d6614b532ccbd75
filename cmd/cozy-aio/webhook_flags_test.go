package main

import (
	"io"
	"testing"
	"time"
)

// The webhook server listens only when asked: the static pod shares the
// host's network.
func TestWebhookAddrIsOffUnlessSet(t *testing.T) {
	f, err := parseRun(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.opts.Engine.WebhookAddr != "" || f.opts.Engine.Notify.RateLimit != 5*time.Minute {
		t.Fatalf("defaults: webhook %q, rate limit %s", f.opts.Engine.WebhookAddr, f.opts.Engine.Notify.RateLimit)
	}
	t.Setenv("COZY_AIO_NOTIFICATION_RATE_LIMIT", "1m")
	f, err = parseRun([]string{"--webhook-addr", ":9292"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.opts.Engine.WebhookAddr != ":9292" || f.opts.Engine.Notify.RateLimit != time.Minute {
		t.Fatalf("set: webhook %q, rate limit %s", f.opts.Engine.WebhookAddr, f.opts.Engine.Notify.RateLimit)
	}
}
