package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/chromedp"
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/internal/statuspage"
)

// PageFigures are what the demo saw of cozy-aio's status page
// (docs/status-page.md).
type PageFigures struct {
	// URL is the first replica's page.
	URL string
	// Updates counts the batches of changes the demo's own live client
	// (server-sent events, as the page's script reads them) received.
	Updates int64
	// Browsers is the number of headless Chromium browsers kept on the
	// page through the run (Options.PageBrowsers).
	Browsers int
	// FirstView is, per browser, the time from opening the page once
	// every unit settled to its counts showing every HelmRelease.
	FirstView []time.Duration
	// Latency is, per trial, the time from a reconcile request written to
	// the API server to a browser showing the engine's status write that
	// handled it: the reconcile and the page's push together.
	Latency []time.Duration
}

// pageClient follows the replicas' pages as the page's script does, and
// keeps Options.PageBrowsers headless browsers on the first replica's.
type pageClient struct {
	updates  atomic.Int64
	stop     context.CancelFunc
	wg       sync.WaitGroup
	browsers []context.Context
	cancels  []context.CancelFunc
}

// startPage connects the demo's live client to every replica's page and
// opens the browsers.
func (h *harness) startPage(ctx context.Context) {
	if h.opts.PageOff || len(h.reps) == 0 || h.reps[0].page == "" {
		return
	}
	h.res.Page = &PageFigures{URL: "http://" + h.reps[0].page + "/", Browsers: h.opts.PageBrowsers}
	h.say("status page: %s (live; every replica serves its own)", h.res.Page.URL)
	ctx, cancel := context.WithCancel(ctx)
	p := &pageClient{stop: cancel}
	h.page = p
	for _, r := range h.reps {
		p.wg.Go(func() { p.follow(ctx, "http://"+r.page+statuspage.APIPath+"/watch") })
	}
	if h.opts.PageBrowsers > 0 {
		if confineBrowsers(browserQuota) {
			h.say("the browsers run confined to 20%% of one core until every unit settled (%s)", browserCgroup)
		} else {
			h.say("the browsers run unconfined: no writable cgroup v1 cpu controller")
		}
	}
	for range h.opts.PageBrowsers {
		b, cancel, err := newBrowser()
		if err != nil {
			h.check("status page", false, "starting Chromium: %v", err)
			return
		}
		p.browsers, p.cancels = append(p.browsers, b), append(p.cancels, cancel)
		p.wg.Go(func() {
			// Opened as soon as the page answers, and left open.
			for ctx.Err() == nil {
				tctx, cancel := context.WithTimeout(b, 10*time.Second)
				err := chromedp.Do(tctx, chromedp.Navigate(h.res.Page.URL), chromedp.WaitVisible(chromedp.CSS("#counts")))
				cancel()
				if err == nil {
					return
				}
				time.Sleep(500 * time.Millisecond)
			}
		})
	}
}

// follow reads the live stream of one page, reconnecting as a browser
// does when the process restarts, and counts the batches.
func (p *pageClient) follow(ctx context.Context, url string) {
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
			for sc.Scan() {
				if l := sc.Text(); l == "event: change" || l == "event: reset" {
					p.updates.Add(1)
				}
			}
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (p *pageClient) close() {
	p.stop()
	for _, c := range p.cancels {
		c()
	}
	p.wg.Wait()
	if len(p.cancels) > 0 {
		_ = os.Remove(browserCgroup) // empty once the browsers have exited
	}
}

// browserCgroup confines the browsers' CPU while the units settle (cgroup
// v1's cpu controller, where the machine has it): they stand for browsers
// on other machines, and would otherwise take the two cores the engine and
// the API server are measured on. pageTrials lifts the quota.
const browserCgroup = "/sys/fs/cgroup/cpu/cozy-aio-demo-browsers"

// browserQuota is the browsers' CPU while confined: 20 % of one core.
const browserQuota = "20000"

// confineBrowsers makes the browsers' cgroup with its quota; false when
// the machine has no writable cgroup v1 cpu controller.
func confineBrowsers(quota string) bool {
	if err := os.MkdirAll(browserCgroup, 0o755); err != nil {
		return false
	}
	return os.WriteFile(filepath.Join(browserCgroup, "cpu.cfs_quota_us"), []byte(quota), 0o644) == nil
}

// newBrowser starts a headless Chromium of its own.
func newBrowser() (context.Context, context.CancelFunc, error) {
	path := os.Getenv("CHROMIUM")
	if path == "" {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(name); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		return nil, nil, fmt.Errorf("no Chromium: run hack/chromium.sh, or set CHROMIUM")
	}
	// At the lowest CPU priority: the browsers stand for operators'
	// browsers on other machines, and must not take the two cores from
	// the engine and the API server they measure.
	wrapper, err := os.CreateTemp("", "chromium-nice-*.sh")
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(wrapper, "#!/bin/sh\n[ -w %[1]q ] && echo $$ > %[1]q\nexec nice -n 19 %[2]q \"$@\"\n",
		filepath.Join(browserCgroup, "cgroup.procs"), path)
	wrapper.Close()
	if err := os.Chmod(wrapper.Name(), 0o755); err != nil {
		return nil, nil, err
	}
	path = wrapper.Name()
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(path),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1400, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		os.Remove(path)
		return nil, nil, err
	}
	return ctx, func() { cancel(); cancelAlloc(); os.Remove(path) }, nil
}

// pageTrials measures, once every unit settled and before cozy-aio's
// usage is read, each browser's first view of the page and how soon a
// status write reaches a browser.
func (h *harness) pageTrials(ctx context.Context) {
	p := h.page
	if p == nil || len(p.browsers) == 0 {
		return
	}
	// The trials time the browsers themselves: their whole CPU back.
	confineBrowsers("-1")
	fig := h.res.Page
	want := h.expectedReleases()
	for i, b := range p.browsers {
		tctx, cancel := context.WithTimeout(b, 60*time.Second)
		_ = chromedp.Do(tctx, chromedp.Navigate("about:blank"))
		start := time.Now()
		expr := fmt.Sprintf(`(document.querySelector('[data-count="HelmRelease/total"]')?.textContent || "") === "%d"`, want)
		err := chromedp.Do(tctx, chromedp.Navigate(fig.URL))
		if err == nil {
			err = until(tctx, expr)
		}
		cancel()
		if err != nil {
			h.check("status page", false, "browser %d: the first view never showed %d HelmReleases: %v", i+1, want, err)
			return
		}
		fig.FirstView = append(fig.FirstView, time.Since(start))
	}
	var hrs helmv2.HelmReleaseList
	if err := h.c.List(ctx, &hrs, client.Limit(5)); err != nil || len(hrs.Items) == 0 {
		h.check("status page", false, "listing releases for the latency trials: %v", err)
		return
	}
	b := p.browsers[0]
	for _, hr := range hrs.Items {
		tctx, cancel := context.WithTimeout(b, 60*time.Second)
		err := chromedp.Do(tctx, chromedp.Navigate(fig.URL+"#/object/HelmRelease/"+hr.Namespace+"/"+hr.Name),
			chromedp.WaitVisible(chromedp.CSS("#handled")))
		if err != nil {
			cancel()
			h.check("status page", false, "opening %s/%s: %v", hr.Namespace, hr.Name, err)
			return
		}
		at := time.Now().Format(time.RFC3339Nano)
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, at)
		start := time.Now()
		if err := h.c.Patch(ctx, &hr, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
			cancel()
			h.check("status page", false, "requesting a reconcile: %v", err)
			return
		}
		err = until(tctx, fmt.Sprintf(`document.getElementById("handled")?.textContent === %q`, at))
		cancel()
		if err != nil {
			h.check("status page", false, "%s/%s: the handled request never showed: %v", hr.Namespace, hr.Name, err)
			return
		}
		fig.Latency = append(fig.Latency, time.Since(start))
	}
}

// until evaluates expr in the tab every 5 ms until it is true: an
// evaluation that fails while the page loads is tried again.
func until(ctx context.Context, expr string) error {
	var last error
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// verifyPage checks that a replica's page counts what the API server
// holds at the end.
func (h *harness) verifyPage(ctx context.Context) {
	if h.page == nil {
		return
	}
	h.res.Page.Updates = h.page.updates.Load()
	want := countUnits(h.res.Units)
	var last string
	deadline := time.Now().Add(15 * time.Second)
	for {
		for _, r := range h.reps {
			if !r.running() {
				continue
			}
			ov, err := readOverview(ctx, "http://"+r.page+statuspage.APIPath+"/overview")
			if err != nil {
				last = err.Error()
				continue
			}
			got := map[string][2]int{}
			for _, k := range ov.Kinds {
				got[k.Kind] = [2]int{k.Ready, k.Total}
			}
			var diff []string
			for _, c := range want {
				if g := got[c.Kind]; g != [2]int{c.Ready, c.Total} {
					diff = append(diff, fmt.Sprintf("%s %d/%d, the API server %d/%d", c.Kind, g[0], g[1], c.Ready, c.Total))
				}
			}
			if len(diff) == 0 {
				h.check("status page", true, "%s counts what the API server holds; %d updates pushed to the demo's live client",
					r.name(), h.res.Page.Updates)
				return
			}
			last = r.name() + ": " + strings.Join(diff, "; ")
		}
		if time.Now().After(deadline) {
			h.check("status page", false, "the page's counts differ: %s", last)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func readOverview(ctx context.Context, url string) (*statuspage.Overview, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	var ov statuspage.Overview
	return &ov, json.NewDecoder(resp.Body).Decode(&ov)
}

// String summarises the figures in one line.
func (f *PageFigures) String() string {
	s := fmt.Sprintf("status page %s: %d updates pushed to the demo's live client", f.URL, f.Updates)
	if len(f.FirstView) > 0 {
		var views []string
		for _, d := range f.FirstView {
			views = append(views, d.Round(time.Millisecond).String())
		}
		s += fmt.Sprintf("; %d browsers connected; first view %s", f.Browsers, strings.Join(views, ", "))
	}
	if len(f.Latency) > 0 {
		l := slices.Clone(f.Latency)
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		s += fmt.Sprintf("; reconcile request → status write shown in the browser: median %s, max %s over %d",
			l[len(l)/2].Round(time.Millisecond), l[len(l)-1].Round(time.Millisecond), len(l))
	}
	return s
}
