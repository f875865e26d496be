package report

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"

	"github.com/aisched/aisched/pkg/sim/metrics"
)

// palette colours the policies, in order (colour-blind safe, Okabe-Ito).
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"}

const (
	svgWidth   = 720
	plotLeft   = 70
	plotRight  = 200 // room for the legend
	plotTop    = 40
	plotHeight = 320
	barHeight  = 22
	labelWidth = 170
)

// WriteSVG draws the report as an SVG image: for a trace replay, the
// unallocated GPU % of each policy (median over seeds) against the
// arrived GPU request, the FGD paper's figure; then, for every other
// numeric metric, a bar chart with a bar per policy.
func (r *Report) WriteSVG(w io.Writer) error {
	sums := make([]map[string]any, len(r.Policies))
	for i, p := range r.Policies {
		sum, err := p.Summary(r.Metrics)
		if err != nil {
			return err
		}
		sums[i] = sum
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="18" font-weight="bold">%s</text>`+"\n", plotLeft, esc(r.Scenario))
	y := 30
	if curves := r.curves(sums); len(curves) > 0 {
		y = r.curveChart(&b, curves, y)
	}
	for _, k := range r.Metrics {
		if k == curveKey {
			continue
		}
		values := make([]float64, len(sums))
		measured := false
		for i, sum := range sums {
			if v, ok := sum[k].(float64); ok {
				values[i], measured = v, true
			} else {
				values[i] = math.NaN()
			}
		}
		if measured {
			y = r.barChart(&b, k, values, y)
		}
	}
	_, err := fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n"+
		`<rect width="100%%" height="100%%" fill="white"/>`+"\n%s</svg>\n", svgWidth, y+20, svgWidth, y+20, b.String())
	return err
}

func (r *Report) curves(sums []map[string]any) map[int][]metrics.CurvePoint {
	out := map[int][]metrics.CurvePoint{}
	for i, sum := range sums {
		if c, ok := sum[curveKey].([]metrics.CurvePoint); ok && len(c) > 1 {
			out[i] = c
		}
	}
	return out
}

// curveChart draws the curves below y and returns the new bottom.
func (r *Report) curveChart(b *strings.Builder, curves map[int][]metrics.CurvePoint, y int) int {
	minX, maxX, maxY := math.Inf(1), math.Inf(-1), 0.0
	for _, c := range curves {
		for _, p := range c {
			minX, maxX = math.Min(minX, float64(p.ArrivedPct)), math.Max(maxX, float64(p.ArrivedPct))
			maxY = math.Max(maxY, p.UnallocatedGPUPct)
		}
	}
	maxY = math.Max(5, math.Ceil(maxY/5)*5)
	top := y + plotTop
	width := svgWidth - plotLeft - plotRight
	px := func(x float64) float64 { return plotLeft + (x-minX)/math.Max(maxX-minX, 1)*float64(width) }
	py := func(v float64) float64 { return float64(top+plotHeight) - v/maxY*plotHeight }
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="14">unallocated GPU %% (median over seeds; lower is better) by arrived GPU request</text>`+"\n", plotLeft, top-12)
	for v := 0.0; v <= maxY; v += maxY / 5 {
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n",
			plotLeft, py(v), plotLeft+width, py(v), plotLeft-6, py(v)+4, v)
	}
	for x := math.Ceil(minX/10) * 10; x <= maxX; x += 10 {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" text-anchor="middle">%g%%</text>`+"\n",
			px(x), top, px(x), top+plotHeight, px(x), top+plotHeight+16, x)
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">arrived GPU request, %% of capacity</text>`+"\n", plotLeft+width/2, top+plotHeight+34)
	row := 0
	for i, p := range r.Policies {
		c, ok := curves[i]
		if !ok {
			continue
		}
		colour := palette[i%len(palette)]
		points := make([]string, len(c))
		for j, pt := range c {
			points[j] = fmt.Sprintf("%.1f,%.1f", px(float64(pt.ArrivedPct)), py(pt.UnallocatedGPUPct))
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", colour, strings.Join(points, " "))
		ly := top + 10 + row*20
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/><text x="%d" y="%d">%s</text>`+"\n",
			plotLeft+width+16, ly, plotLeft+width+36, ly, colour, plotLeft+width+42, ly+4, esc(p.Name))
		row++
	}
	return top + plotHeight + 50
}

// barChart draws one metric's bars below y and returns the new bottom.
func (r *Report) barChart(b *strings.Builder, key string, values []float64, y int) int {
	top := y + 30
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="14">%s</text>`+"\n", plotLeft, top-10, esc(key+directionNote(key)))
	scale := 0.0
	for _, v := range values {
		if !math.IsNaN(v) {
			scale = math.Max(scale, math.Abs(v))
		}
	}
	width := float64(svgWidth - labelWidth - 90)
	for i, p := range r.Policies {
		by := top + i*(barHeight+6)
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelWidth-8, by+barHeight-6, esc(p.Name))
		v := values[i]
		if math.IsNaN(v) {
			fmt.Fprintf(b, `<text x="%d" y="%d" fill="#888">not measured</text>`+"\n", labelWidth, by+barHeight-6)
			continue
		}
		length := 0.0
		if scale > 0 {
			length = math.Abs(v) / scale * width
		}
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/><text x="%.1f" y="%d">%s</text>`+"\n",
			labelWidth, by, length, barHeight, palette[i%len(palette)], float64(labelWidth)+length+6, by+barHeight-6, format(v))
	}
	return top + len(r.Policies)*(barHeight+6)
}

func esc(s string) string { return html.EscapeString(s) }
