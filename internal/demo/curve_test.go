package demo

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"testing"
	"time"
)

func TestCurveSVGIsWellFormed(t *testing.T) {
	points := []CurvePoint{
		{Releases: 1000, Time: 15 * time.Second, PeakRSS: 100 << 20, CPU: 5 * time.Second, Requests: 12100},
		{Releases: 3000, Time: 46 * time.Second, PeakRSS: 150 << 20, CPU: 16 * time.Second, Requests: 36300},
		{Releases: 10000, Time: 160 * time.Second, PeakRSS: 300 << 20, CPU: 55 * time.Second, Requests: 121000},
	}
	svg := CurveSVG(points, "cozy-aio <scale>", "machine speed 40000 & more")
	dec := xml.NewDecoder(bytes.NewReader(svg))
	circles, texts := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "circle":
				circles++
			case "text":
				texts++
			}
		}
	}
	if circles != 4*len(points) {
		t.Errorf("%d points drawn, want %d (one per size in each of 4 panels)", circles, 4*len(points))
	}
	if !bytes.Contains(svg, []byte(">12.1<")) || !bytes.Contains(svg, []byte(">160<")) {
		t.Errorf("the labels should carry 12.1 requests per release and 160 s:\n%s", svg)
	}
}

func TestNiceCeil(t *testing.T) {
	for v, want := range map[float64]float64{0: 1, 0.5: 1, 1.2: 2, 3: 5, 7: 10, 12.1: 20, 160: 200, 301: 500} {
		if got := niceCeil(v); got != want {
			t.Errorf("niceCeil(%v) = %v, want %v", v, got, want)
		}
	}
}
