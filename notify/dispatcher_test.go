package notify

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
)

type reports struct {
	mu  sync.Mutex
	all []Delivery
	ch  chan Delivery
}

func newReports() *reports { return &reports{ch: make(chan Delivery, 1000)} }

func (r *reports) add(d Delivery) {
	r.mu.Lock()
	r.all = append(r.all, d)
	r.mu.Unlock()
	r.ch <- d
}

func (r *reports) next(t *testing.T) Delivery {
	t.Helper()
	select {
	case d := <-r.ch:
		return d
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery reported")
	}
	return Delivery{}
}

var (
	provRef  = types.NamespacedName{Namespace: "apps", Name: "hook"}
	alertRef = types.NamespacedName{Namespace: "apps", Name: "all"}
)

func startDispatcher(t *testing.T, opts DispatcherOptions) (*Dispatcher, *reports) {
	t.Helper()
	rep := newReports()
	opts.Report = rep.add
	d := NewDispatcher(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	d.SetAlert(alertRef, Alert{Provider: provRef, Sources: []Source{{Kind: "Kustomization", Name: "*"}}, Summary: "s"})
	return d, rep
}

func TestDispatcherSendsOncePerInterval(t *testing.T) {
	rec := newRecorder(t)
	reg := prometheus.NewRegistry()
	d, rep := startDispatcher(t, DispatcherOptions{Registerer: reg})
	if err := d.SetProvider(provRef, Provider{Type: TypeGeneric, Address: rec.URL}); err != nil {
		t.Fatal(err)
	}
	e := sampleEvent()
	d.Record(e, nil)
	d.Record(e, nil) // the same event for the same object: rate limited
	other := sampleEvent()
	other.Message = "another"
	d.Record(other, nil)
	for range 2 {
		if dl := rep.next(t); dl.Err != nil || dl.Attempts != 1 {
			t.Fatalf("delivery %+v", dl)
		}
	}
	if n := len(rec.got()); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
	if v := testutil.ToFloat64(d.m.rateLimited); v != 1 {
		t.Fatalf("rate limited = %v", v)
	}
	if v := testutil.ToFloat64(d.m.results.WithLabelValues(provRef.String(), "sent")); v != 2 {
		t.Fatalf("sent = %v", v)
	}
}

func TestDispatcherRetriesWithBackoff(t *testing.T) {
	rec := newRecorder(t, 500, 503, 200)
	d, rep := startDispatcher(t, DispatcherOptions{Backoff: time.Millisecond})
	_ = d.SetProvider(provRef, Provider{Type: TypeGeneric, Address: rec.URL})
	d.Record(sampleEvent(), nil)
	if dl := rep.next(t); dl.Err != nil || dl.Attempts != 3 {
		t.Fatalf("delivery %+v", dl)
	}
}

func TestDispatcherReportsAFailingProvider(t *testing.T) {
	rec := newRecorder(t, 500, 500, 500, 500, 500)
	d, rep := startDispatcher(t, DispatcherOptions{Backoff: time.Millisecond, Retries: 2})
	_ = d.SetProvider(provRef, Provider{Type: TypeGeneric, Address: rec.URL})
	d.Record(sampleEvent(), nil)
	dl := rep.next(t)
	var se *StatusError
	if !errors.As(dl.Err, &se) || se.Code != 500 || dl.Attempts != 3 || dl.Alert != alertRef {
		t.Fatalf("delivery %+v", dl)
	}
	// Unreachable: transport errors are retried too.
	_ = d.SetProvider(provRef, Provider{Type: TypeGeneric, Address: "http://127.0.0.1:1/x", Timeout: time.Second})
	e := sampleEvent()
	e.Message = "again"
	d.Record(e, nil)
	if dl := rep.next(t); dl.Err == nil || dl.Attempts != 3 {
		t.Fatalf("delivery %+v", dl)
	}
}

func TestDispatcherNeverBlocksAndDropsWhenFull(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		<-release
	}))
	defer srv.Close()
	defer close(release)
	reg := prometheus.NewRegistry()
	d, rep := startDispatcher(t, DispatcherOptions{QueueSize: 4, Registerer: reg})
	_ = d.SetProvider(provRef, Provider{Type: TypeGeneric, Address: srv.URL})
	for i := range 100 {
		e := sampleEvent()
		e.Message = fmt.Sprint("failure ", i)
		d.Record(e, nil) // returns although the provider answers nothing
	}
	// One in flight, four queued, the rest dropped and counted; Report says
	// so once.
	dl := rep.next(t)
	if !dl.Dropped || dl.Err == nil {
		t.Fatalf("delivery %+v", dl)
	}
	dropped := testutil.ToFloat64(d.m.results.WithLabelValues(provRef.String(), "dropped"))
	queued := testutil.ToFloat64(d.m.queued.WithLabelValues(provRef.String()))
	if dropped < 95 || dropped > 96 || queued > 4 {
		t.Fatalf("dropped %v, queued %v", dropped, queued)
	}
	select {
	case dl := <-rep.ch:
		t.Fatalf("more than one drop report: %+v", dl)
	default:
	}
}

func TestDispatcherUnknownSuspendedAndInvalidProviders(t *testing.T) {
	rec := newRecorder(t)
	d, rep := startDispatcher(t, DispatcherOptions{RateLimit: -1})
	d.Record(sampleEvent(), nil)
	if dl := rep.next(t); !errors.Is(dl.Err, ErrProviderNotFound) {
		t.Fatalf("delivery %+v", dl)
	}
	_ = d.SetProvider(provRef, Provider{Type: TypeGeneric, Address: rec.URL, Suspend: true})
	d.Record(sampleEvent(), nil)
	if err := d.SetProvider(provRef, Provider{Type: "telegram", Address: rec.URL}); err == nil {
		t.Fatal("telegram accepted")
	}
	d.Record(sampleEvent(), nil)
	var ut *UnsupportedTypeError
	if dl := rep.next(t); !errors.As(dl.Err, &ut) {
		t.Fatalf("delivery %+v", dl)
	}
	d.SetProviderError(provRef, errors.New("secret apps/hook-secret: not found"))
	d.Record(sampleEvent(), nil)
	if dl := rep.next(t); dl.Err == nil || dl.Err.Error() != "secret apps/hook-secret: not found" {
		t.Fatalf("delivery %+v", dl)
	}
	if len(rec.got()) != 0 {
		t.Fatal("a suspended or invalid provider sent")
	}
}
