package demo

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// CurvePoint is one size of the scale curve (make bench-curve): a scale
// run of Releases HelmReleases and what it measured.
type CurvePoint struct {
	Releases int
	// Time is from cozy-aio's start to every unit settled.
	Time    time.Duration
	PeakRSS int64
	CPU     time.Duration
	// Requests is cozy-aio's API requests in the run (audit log).
	Requests int
}

// PointOf reads a curve point from a scale run's result.
func PointOf(releases int, r *Result) CurvePoint {
	p := CurvePoint{Releases: releases, PeakRSS: r.PeakRSS, CPU: r.CPU, Requests: r.Breakdown.Total()}
	if !r.AllSettled.IsZero() {
		p.Time = r.AllSettled.Sub(r.CozyStarted)
	}
	return p
}

// PerRelease is the point's requests per release.
func (p CurvePoint) PerRelease() float64 {
	if p.Releases == 0 {
		return 0
	}
	return float64(p.Requests) / float64(p.Releases)
}

// CurveSVG draws the curve as a small SVG: four panels sharing the x axis
// (releases), each a line through the points: time to all Ready (s), peak
// RSS (MB) with the goal of 64 MB plus 8 KB per release dashed, cozy-aio
// CPU (s) and API requests per release. title goes above; note (the
// machine's speed, say) below.
func CurveSVG(points []CurvePoint, title, note string) []byte {
	const (
		pw, ph     = 300, 170 // one panel's plot area
		left, top  = 60, 40   // margins of a panel
		cellW      = pw + left + 30
		cellH      = ph + top + 40
		cols, rows = 2, 2
	)
	width, height := cols*cellW, rows*cellH+50
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" text-anchor="middle">%s</text>`+"\n", width/2, xmlEscape(title))
	maxX := 0
	for _, p := range points {
		maxX = max(maxX, p.Releases)
	}
	type panel struct {
		name string
		y    func(CurvePoint) float64
		goal func(x float64) float64 // nil: none
	}
	panels := []panel{
		{name: "time to all Ready (s)", y: func(p CurvePoint) float64 { return p.Time.Seconds() }},
		{name: "peak RSS (MB); dashed: 64 MB + 8 KB per release", y: func(p CurvePoint) float64 { return float64(p.PeakRSS) / (1 << 20) },
			goal: func(x float64) float64 { return 64 + x*8/1024 }},
		{name: "cozy-aio CPU (s)", y: func(p CurvePoint) float64 { return p.CPU.Seconds() }},
		{name: "API requests per release", y: func(p CurvePoint) float64 { return p.PerRelease() }},
	}
	for i, pn := range panels {
		ox, oy := (i%cols)*cellW+left, (i/cols)*cellH+top+30
		maxY := 0.0
		for _, p := range points {
			maxY = math.Max(maxY, pn.y(p))
		}
		if pn.goal != nil {
			maxY = math.Max(maxY, pn.goal(float64(maxX)))
		}
		maxY = niceCeil(maxY)
		x := func(v float64) float64 { return float64(ox) + v/float64(max(maxX, 1))*pw }
		y := func(v float64) float64 { return float64(oy+ph) - v/maxY*ph }
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12">%s</text>`+"\n", ox, oy-10, xmlEscape(pn.name))
		fmt.Fprintf(&b, `<path d="M%d %d V%d H%d" fill="none" stroke="black"/>`+"\n", ox, oy, oy+ph, ox+pw)
		for t := 0; t <= 4; t++ {
			v := maxY * float64(t) / 4
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", ox-4, y(v)+4, trimFloat(v))
			if t > 0 {
				fmt.Fprintf(&b, `<path d="M%d %.1f H%d" stroke="#ddd"/>`+"\n", ox, y(v), ox+pw)
			}
		}
		for _, p := range points {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", x(float64(p.Releases)), oy+ph+14, p.Releases)
		}
		if pn.goal != nil {
			fmt.Fprintf(&b, `<path d="M%.1f %.1f L%.1f %.1f" stroke="#c33" stroke-dasharray="4 3"/>`+"\n",
				x(0), y(pn.goal(0)), x(float64(maxX)), y(pn.goal(float64(maxX))))
		}
		var d strings.Builder
		for j, p := range points {
			cmd := "L"
			if j == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f ", cmd, x(float64(p.Releases)), y(pn.y(p)))
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="#2a6ebb" stroke-width="2"/>`+"\n", strings.TrimSpace(d.String()))
		for _, p := range points {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="#2a6ebb"/>`+"\n", x(float64(p.Releases)), y(pn.y(p)))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#2a6ebb">%s</text>`+"\n", x(float64(p.Releases)), y(pn.y(p))-6, trimFloat(pn.y(p)))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">HelmReleases</text>`+"\n", ox+pw/2, oy+ph+28)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", width/2, height-12, xmlEscape(note))
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (at least 1).
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	if v >= 100 || v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
