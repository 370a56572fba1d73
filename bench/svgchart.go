package bench

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"strconv"
	"strings"
)

// The report's main charts are drawn as SVG by hand, sized to be shown at
// their own size (svgWidth px wide, two side by side in the page), with
// text in the page's font at normal sizes: what a reader takes in at a
// glance without zooming. Each has a title, labelled axes with units, and
// a legend (class "legend") under the plot.

const (
	svgWidth     = 540
	svgPlotH     = 250 // height of the plotting area
	svgLeft      = 64  // room for the y tick labels and the y axis label
	svgRight     = 18
	svgTop       = 40 // room for the title
	svgFontTick  = 12
	svgFontLabel = 13
	svgFontTitle = 15
)

// svgPalette is the report's colors, none first (grey).
var svgPalette = []string{"#555555", "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"}

// chartSeries is one line of a lineChart: a value per category (NaN where
// there is none).
type chartSeries struct {
	Label  string
	Values []float64
	Color  string
	Dash   string // stroke-dasharray; "" for a solid line
	Marker int    // 0 circle, 1 square, 2 triangle, 3 diamond
}

// refLine is a horizontal line across the plot, labelled at its right end.
type refLine struct {
	Y     float64
	Label string
	Color string
}

// lineChart is values per category (value sizes) for a few series.
type lineChart struct {
	Title, XLabel, YLabel string
	Categories            []string
	Series                []chartSeries
	// YLog draws the y axis on a log scale (for time ratios); else linear
	// from YMin to YMax.
	YLog       bool
	YMin, YMax float64
	YTick      func(float64) string
	Refs       []refLine
}

// scatterPoint is one codec of the trade-off chart.
type scatterPoint struct {
	Label  string
	X, Y   float64
	Color  string
	Marked bool // the recommended choice
}

// legendItem is one entry of a legend: a line, a marker, or both.
type legendItem struct {
	Label  string
	Color  string
	Dash   string
	Line   bool
	Marker int // -1 for none
	Ring   bool
}

// scatterChart is one point per codec, labelled, with reference lines.
type scatterChart struct {
	Title, XLabel, YLabel string
	Points                []scatterPoint
	XTick, YTick          func(float64) string
	YMin, YMax            float64
	Refs                  []refLine
	Legend                []legendItem
}

// svgWriter accumulates an SVG document.
type svgWriter struct{ b strings.Builder }

func (w *svgWriter) f(format string, args ...any) { fmt.Fprintf(&w.b, format, args...) }

func esc(s string) string { return template.HTMLEscapeString(s) }

// textWidth estimates the width of s in px at a font size: system fonts
// average a little over half the size per character.
func textWidth(s string, size float64) float64 {
	return float64(len([]rune(s))) * size * 0.56
}

// legendLayout places the items in rows under the plot; it returns each
// item's position (relative to the legend's top left) and the height.
func legendLayout(items []legendItem, width float64) (pos [][2]float64, height float64) {
	x, y := 0.0, 0.0
	for _, it := range items {
		w := 30 + textWidth(it.Label, svgFontLabel) + 18
		if x > 0 && x+w > width {
			x, y = 0, y+20
		}
		pos = append(pos, [2]float64{x, y})
		x += w
	}
	if len(items) > 0 {
		height = y + 20
	}
	return pos, height
}

func (w *svgWriter) marker(shape int, x, y float64, color string, r float64) {
	switch shape % 4 {
	case 1:
		w.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`, x-r, y-r, 2*r, 2*r, color)
	case 2:
		w.f(`<path d="M%.1f %.1fL%.1f %.1fL%.1f %.1fZ" fill="%s"/>`, x, y-r*1.2, x+r*1.1, y+r*0.9, x-r*1.1, y+r*0.9, color)
	case 3:
		w.f(`<path d="M%.1f %.1fL%.1f %.1fL%.1f %.1fL%.1f %.1fZ" fill="%s"/>`, x, y-r*1.3, x+r*1.3, y, x, y+r*1.3, x-r*1.3, y, color)
	default:
		w.f(`<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s"/>`, x, y, r, color)
	}
}

func (w *svgWriter) legend(items []legendItem, left, top float64) {
	pos, _ := legendLayout(items, svgWidth-left-svgRight)
	w.f(`<g class="legend" font-size="%d">`, svgFontLabel)
	for i, it := range items {
		x, y := left+pos[i][0], top+pos[i][1]+10
		if it.Line {
			dash := ""
			if it.Dash != "" {
				dash = fmt.Sprintf(` stroke-dasharray="%s"`, it.Dash)
			}
			w.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5"%s/>`, x, y, x+24, y, it.Color, dash)
		}
		if it.Marker >= 0 {
			w.marker(it.Marker, x+12, y, it.Color, 4.5)
		}
		if it.Ring {
			w.f(`<circle cx="%.1f" cy="%.1f" r="8" fill="none" stroke="#111" stroke-width="2"/>`, x+12, y)
		}
		w.f(`<text x="%.1f" y="%.1f" dominant-baseline="middle">%s</text>`, x+30, y+1, esc(it.Label))
	}
	w.f(`</g>`)
}

// open starts the document; the title is both shown and the SVG's <title>.
func (w *svgWriter) open(title string, height float64) {
	w.f(`<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 %d %.0f" width="%d" height="%.0f" role="img" font-family="system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif">`,
		svgWidth, height, svgWidth, height)
	w.f(`<title>%s</title>`, esc(title))
	w.f(`<rect width="100%%" height="100%%" fill="#fff"/>`)
	w.f(`<text class="title" x="%d" y="22" font-size="%d" font-weight="600" fill="#222">%s</text>`, 10, svgFontTitle, esc(title))
}

// axes draws the frame, the grid at yTicks, and both axis labels.
func (w *svgWriter) axes(xLabel, yLabel string, plotW float64, yTicks []float64, ypos func(float64) float64, yTick func(float64) string) {
	left, top, bottom := float64(svgLeft), float64(svgTop), float64(svgTop+svgPlotH)
	w.f(`<g class="grid" stroke="#e3e3e3" stroke-width="1">`)
	for _, t := range yTicks {
		y := ypos(t)
		w.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, left, y, left+plotW, y)
	}
	w.f(`</g>`)
	w.f(`<g class="axis y" font-size="%d" fill="#333">`, svgFontTick)
	for _, t := range yTicks {
		w.f(`<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`, left-6, ypos(t), esc(yTick(t)))
	}
	w.f(`</g>`)
	w.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`, left, top, plotW, bottom-top)
	w.f(`<text class="axis-label x" x="%.1f" y="%.1f" font-size="%d" text-anchor="middle" fill="#222">%s</text>`,
		left+plotW/2, bottom+40, svgFontLabel, esc(xLabel))
	w.f(`<text class="axis-label y" transform="translate(16 %.1f) rotate(-90)" font-size="%d" text-anchor="middle" fill="#222">%s</text>`,
		(top+bottom)/2, svgFontLabel, esc(yLabel))
}

// svg draws the line chart.
func (c lineChart) svg() template.HTML {
	plotW := float64(svgWidth - svgLeft - svgRight)
	var items []legendItem
	for _, s := range c.Series {
		items = append(items, legendItem{Label: s.Label, Color: s.Color, Dash: s.Dash, Line: true, Marker: s.Marker})
	}
	for _, r := range c.Refs {
		items = append(items, legendItem{Label: r.Label, Color: r.Color, Dash: "5 4", Line: true, Marker: -1})
	}
	_, legH := legendLayout(items, svgWidth-svgLeft-svgRight)
	height := float64(svgTop+svgPlotH) + 54 + legH + 8

	lo, hi := c.YMin, c.YMax
	var ticks []float64
	if c.YLog {
		lo, hi = math.Inf(1), math.Inf(-1)
		for _, s := range c.Series {
			for _, v := range s.Values {
				if v > 0 && !math.IsNaN(v) {
					lo, hi = min(lo, v), max(hi, v)
				}
			}
		}
		for _, r := range c.Refs {
			lo, hi = min(lo, r.Y), max(hi, r.Y)
		}
		if math.IsInf(lo, 1) {
			lo, hi = 1, 2
		}
		ticks, lo, hi = logTicks(lo, hi)
	} else {
		ticks = linearTicks(lo, hi, 5)
	}
	ypos := func(v float64) float64 {
		f := (v - lo) / (hi - lo)
		if c.YLog {
			f = (math.Log(v) - math.Log(lo)) / (math.Log(hi) - math.Log(lo))
		}
		return float64(svgTop+svgPlotH) - f*svgPlotH
	}
	n := len(c.Categories)
	xpos := func(i int) float64 { return svgLeft + plotW*(float64(i)+0.5)/float64(max(n, 1)) }

	var w svgWriter
	w.open(c.Title, height)
	w.axes(c.XLabel, c.YLabel, plotW, ticks, ypos, c.YTick)
	w.f(`<g class="axis x" font-size="%d" fill="#333">`, svgFontTick)
	for i, cat := range c.Categories {
		w.f(`<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, xpos(i), float64(svgTop+svgPlotH)+18, esc(cat))
	}
	w.f(`</g>`)
	for _, r := range c.Refs {
		w.f(`<line class="ref" x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="5 4"/>`,
			svgLeft, ypos(r.Y), svgLeft+plotW, ypos(r.Y), r.Color)
	}
	for _, s := range c.Series {
		w.f(`<g class="series" data-label="%s">`, esc(s.Label))
		var d []string
		for i, v := range s.Values {
			if math.IsNaN(v) || c.YLog && v <= 0 {
				continue
			}
			cmd := "L"
			if len(d) == 0 {
				cmd = "M"
			}
			d = append(d, fmt.Sprintf("%s%.1f %.1f", cmd, xpos(i), ypos(v)))
		}
		dash := ""
		if s.Dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, s.Dash)
		}
		if len(d) > 1 {
			w.f(`<path d="%s" fill="none" stroke="%s" stroke-width="2.5"%s/>`, strings.Join(d, ""), s.Color, dash)
		}
		for i, v := range s.Values {
			if math.IsNaN(v) || c.YLog && v <= 0 {
				continue
			}
			w.marker(s.Marker, xpos(i), ypos(v), s.Color, 4)
		}
		w.f(`</g>`)
	}
	w.legend(items, svgLeft, float64(svgTop+svgPlotH)+54)
	w.f(`</svg>`)
	return template.HTML(w.b.String())
}

// svg draws the scatter chart: x and y linear, each point labelled.
func (c scatterChart) svg() template.HTML {
	plotW := float64(svgWidth - svgLeft - svgRight)
	_, legH := legendLayout(c.Legend, svgWidth-svgLeft-svgRight)
	height := float64(svgTop+svgPlotH) + 54 + legH + 8

	xlo, xhi := math.Inf(1), math.Inf(-1)
	for _, p := range c.Points {
		xlo, xhi = min(xlo, p.X), max(xhi, p.X)
	}
	if math.IsInf(xlo, 1) {
		xlo, xhi = 1, 2
	}
	// The x axis starts at 1× (no compression) or below, and leaves room
	// for the labels right of the points.
	xlo = math.Min(1, math.Floor(xlo*4)/4)
	xhi = xlo + (xhi-xlo)*1.25 + 0.3
	// Ticks every round step from xlo, so that 1× is one of them.
	steps := linearTicks(0, xhi-xlo, 5)
	step := steps[1] - steps[0]
	n := math.Ceil((xhi - xlo) / step)
	xhi = xlo + n*step
	var xticks []float64
	for k := 0.0; k <= n; k++ {
		xticks = append(xticks, xlo+k*step)
	}
	ylo, yhi := c.YMin, c.YMax
	yticks := linearTicks(ylo, yhi, 5)
	xpos := func(v float64) float64 { return svgLeft + plotW*(v-xlo)/(xhi-xlo) }
	ypos := func(v float64) float64 { return float64(svgTop+svgPlotH) - svgPlotH*(v-ylo)/(yhi-ylo) }

	var w svgWriter
	w.open(c.Title, height)
	w.axes(c.XLabel, c.YLabel, plotW, yticks, ypos, c.YTick)
	w.f(`<g class="axis x" font-size="%d" fill="#333">`, svgFontTick)
	for _, t := range xticks {
		w.f(`<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, xpos(t), float64(svgTop+svgPlotH)+18, esc(c.XTick(t)))
	}
	w.f(`</g>`)
	for _, r := range c.Refs {
		y := ypos(r.Y)
		w.f(`<line class="ref" x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="5 4"/>`,
			svgLeft, y, svgLeft+plotW, y, r.Color)
	}
	// Labels right of their points (left near the right edge), nudged
	// apart when two would overlap.
	type lab struct {
		x, y   float64
		anchor string
		p      scatterPoint
	}
	labs := make([]lab, len(c.Points))
	for i, p := range c.Points {
		x, y := xpos(p.X), ypos(p.Y)
		l := lab{x + 10, y, "start", p}
		if p.Marked {
			l.x += 5
		}
		if l.x+textWidth(p.Label, svgFontLabel) > svgLeft+plotW-4 {
			l.x, l.anchor = x-10, "end"
		}
		labs[i] = l
	}
	order := make([]int, len(labs))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return labs[order[a]].y < labs[order[b]].y })
	for k := 1; k < len(order); k++ {
		a, b := &labs[order[k-1]], &labs[order[k]]
		if b.y-a.y < 15 && math.Abs(a.x-b.x) < 120 {
			b.y = a.y + 15
		}
	}
	for i, p := range c.Points {
		w.f(`<g class="point" data-label="%s">`, esc(p.Label))
		x, y := xpos(p.X), ypos(p.Y)
		w.marker(0, x, y, p.Color, 5.5)
		weight := ""
		if p.Marked {
			w.f(`<circle class="recommended" cx="%.1f" cy="%.1f" r="11" fill="none" stroke="#111" stroke-width="2.5"/>`, x, y)
			weight = ` font-weight="700"`
		}
		l := labs[i]
		w.f(`<text x="%.1f" y="%.1f" font-size="%d" text-anchor="%s" dominant-baseline="middle" fill="#222"%s>%s</text>`,
			l.x, l.y, svgFontLabel, l.anchor, weight, esc(p.Label))
		w.f(`</g>`)
	}
	w.legend(c.Legend, svgLeft, float64(svgTop+svgPlotH)+54)
	w.f(`</svg>`)
	return template.HTML(w.b.String())
}

// linearTicks returns about n round tick values covering lo..hi, the first
// at or below lo and the last at or above hi.
func linearTicks(lo, hi float64, n int) []float64 {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for t := math.Floor(lo/step) * step; t < hi+step*0.999; t += step {
		out = append(out, math.Round(t/step)*step)
	}
	return out
}

// logTicks returns ticks at 1, 2 and 5 times the powers of ten covering
// lo..hi, and the range they span.
func logTicks(lo, hi float64) ([]float64, float64, float64) {
	var all []float64
	for e := -2; e <= 4; e++ {
		for _, m := range []float64{1, 2, 5} {
			all = append(all, m*math.Pow(10, float64(e)))
		}
	}
	first, last := 0, len(all)-1
	for i, t := range all {
		if t <= lo*1.0001 {
			first = i
		}
	}
	for i := len(all) - 1; i >= 0; i-- {
		if all[i] >= hi*0.9999 {
			last = i
		}
	}
	ticks := all[first : last+1]
	return ticks, ticks[0], ticks[len(ticks)-1]
}

// timesTick prints a time ratio tick: "1×", "0.5×", "20×".
func timesTick(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) + "×" }

// pctTick prints a percentage tick.
func pctTick(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) + "%" }
