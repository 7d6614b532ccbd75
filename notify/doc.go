// Package notify sends the engine's events to people and systems, and turns
// webhooks into reconcile requests, as Flux's notification-controller does,
// in-process.
//
// A Dispatcher holds Alerts and Providers (plain values; the engine builds
// them from the Flux objects). Record matches an event against every Alert
// and queues it, without blocking, on the Alert's Provider. Each Provider
// has a bounded queue and one sender that retries with backoff; when the
// queue is full the event is dropped and counted.
//
//	d := notify.NewDispatcher(notify.DispatcherOptions{})
//	go d.Start(ctx)
//	_ = d.SetProvider(ref, notify.Provider{Type: "generic", Address: "https://hooks.example.com"})
//	d.SetAlert(alertRef, notify.Alert{Provider: ref, Sources: []notify.Source{{Kind: "Kustomization", Name: "*", Namespace: "apps"}}})
//	d.Record(event, labels)
//
// A Server serves Flux's Receiver webhooks (/hook/<digest>): it verifies
// each request as the sending service signs it (Receiver.Verify) and calls
// Options.Trigger for a valid one.
package notify
