package notify_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/cozy-aio/notify"
)

func ExampleWebhookPath() {
	// The path Flux serves a Receiver named "github" in flux-system on,
	// with the token "secret".
	fmt.Println(notify.WebhookPath("secret", "github", "flux-system"))
	// Output: /hook/378fe52f036a00794c605a473f36b11f560d09c990660506813b3f644311f3a2
}

func ExampleAlert_Matches() {
	alert := notify.Alert{
		Provider: types.NamespacedName{Namespace: "apps", Name: "slack"},
		Severity: notify.SeverityError,
		Sources:  []notify.Source{{Kind: "HelmRelease", Name: "*", MatchLabels: map[string]string{"team": "web"}}},
	}
	ev := &notify.Event{
		InvolvedObject: corev1.ObjectReference{Kind: "HelmRelease", Namespace: "apps", Name: "frontend"},
		Severity:       notify.SeverityError,
		Message:        "install retries exhausted",
	}
	fmt.Println(alert.Matches("apps", ev, map[string]string{"team": "web"}))
	fmt.Println(alert.Matches("apps", ev, map[string]string{"team": "db"}))
	// Output:
	// true
	// false
}
