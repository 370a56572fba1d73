package bench

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"strings"

	"github.com/squeeze-kv/squeeze/codec"
)

// Figure is one of the report's SVG charts, drawn into the page and
// written as charts/NAME.svg.
type Figure struct {
	Name, Title, Caption string
	SVG                  template.HTML
}

// codecStyle gives every codec of a report the same color and marker in
// every chart: none grey, then the codecs in the order they first appear;
// a codec with a dictionary takes its base codec's color and marker, with
// a dashed line; a codec at rest (compacted) a dotted line.
type codecStyle struct {
	colors  map[string]string
	markers map[string]int
}

func newCodecStyle(names []string) codecStyle {
	s := codecStyle{colors: map[string]string{"none": svgPalette[0]}, markers: map[string]int{"none": 0}}
	n := 0
	for _, c := range names {
		base := strings.TrimSuffix(c, DictSuffix)
		if _, ok := s.colors[base]; ok {
			continue
		}
		n++
		s.colors[base] = svgPalette[1+(n-1)%(len(svgPalette)-1)]
		s.markers[base] = (n - 1) % 4
	}
	return s
}

func (s codecStyle) series(c string, values []float64) chartSeries {
	base := strings.TrimSuffix(c, DictSuffix)
	cs := chartSeries{Label: c, Values: values, Color: s.colors[base], Marker: s.markers[base]}
	if cs.Color == "" {
		cs.Color = svgPalette[0]
	}
	if base != c {
		cs.Label = base + " + dictionary"
		cs.Dash = "7 4"
	}
	if from, to, ok := strings.Cut(c, "->"); ok {
		cs.Label = "compacted to " + strings.Replace(to, DictSuffix, " + dictionary", 1)
		if from != codec.DefaultAlgorithm.String() {
			cs.Label = from + " " + cs.Label
		}
		cs.Dash = "2 4"
		if strings.HasSuffix(c, DictSuffix) {
			cs.Dash = "9 3 2 3"
		}
	}
	return cs
}

// compressedSizes are the sizes of rows that squeeze compresses (shorter
// values are stored as they are), ascending.
func compressedSizes(sizes []int) []int {
	var out []int
	for _, s := range sizes {
		if s >= codec.DefaultMinSize && !containsInt(out, s) {
			out = append(out, s)
		}
	}
	sort.Ints(out)
	return out
}

func sizeNames(sizes []int) []string {
	out := make([]string, len(sizes))
	for i, s := range sizes {
		out[i] = FormatSize(int64(s))
	}
	return out
}

// adviceFigures draws the charts of a Redis study: the trade-off with the
// choice marked and memory saved per size (the first screen), then the
// write and read time against no compression per size.
func adviceFigures(r Report, a *Advice) []Figure {
	var names []string
	for _, f := range a.Codecs {
		names = append(names, f.Codec)
	}
	for _, m := range r.Memory {
		names = append(names, m.Codec)
	}
	for _, row := range r.Redis {
		names = append(names, row.Codec)
	}
	style := newCodecStyle(names)
	band := sizeRange(a.Sizes)
	var out []Figure

	// 1. The trade-off: one point per codec.
	sc := scatterChart{
		Title:  "Memory saved against time, per codec",
		XLabel: "time per operation, × the time without compression",
		YLabel: "Redis memory saved (%)",
		XTick:  timesTick, YTick: pctTick, YMin: 0, YMax: 100,
	}
	sc.Points = append(sc.Points, scatterPoint{Label: "none", X: 1, Y: 0, Color: style.colors["none"]})
	for _, f := range a.Codecs {
		if f.Cost() <= 0 {
			continue
		}
		label := f.Codec
		if f.Codec == a.Write {
			label += " (recommended)"
		}
		sc.Points = append(sc.Points, scatterPoint{Label: label, X: f.Cost(), Y: f.SavedMedian, Color: style.colors[f.Codec], Marked: f.Codec == a.Write})
	}
	sc.Legend = []legendItem{
		{Label: "codec as written", Color: svgPalette[1], Marker: 0},
		{Label: "recommended", Color: "#fff", Marker: -1, Ring: true},
	}
	if c := a.Compact; c != nil {
		// The color of the compacted keys' line in the memory chart.
		color := style.series(c.WrittenWith+"->"+c.Codec, nil).Color
		label := fmt.Sprintf("cold keys compacted to %s", c.Codec)
		sc.Refs = append(sc.Refs, refLine{Y: c.SavedMedian, Label: label, Color: color})
		sc.Legend = append(sc.Legend, legendItem{Label: label, Color: color, Dash: "5 4", Line: true, Marker: -1})
	}
	if len(sc.Points) > 1 {
		out = append(out, Figure{Name: "tradeoff", Title: sc.Title, SVG: sc.svg(),
			Caption: fmt.Sprintf("Values of %s: memory saved (median over the sizes) against the mean of write and read time (%s path). Up and to the left is better; the ring marks the recommendation.", band, a.Path)})
	}

	// 2. Memory saved per codec and size.
	var sizes []int
	for _, m := range r.Memory {
		sizes = append(sizes, m.SizeBytes)
	}
	sizes = compressedSizes(sizes)
	if len(sizes) > 0 {
		lc := lineChart{Title: "Redis memory saved, by value size", XLabel: "value size", YLabel: "memory saved (%)",
			Categories: sizeNames(sizes), YMin: 0, YMax: 100, YTick: pctTick}
		var order []string
		for _, m := range r.Memory {
			if m.Codec != "none" && !contains(order, m.Codec) {
				order = append(order, m.Codec)
			}
		}
		for _, c := range order {
			vals := nanValues(len(sizes))
			for _, m := range r.Memory {
				if m.Codec == c {
					if i := indexInt(sizes, m.SizeBytes); i >= 0 {
						vals[i] = m.SavedPct
					}
				}
			}
			lc.Series = append(lc.Series, style.series(c, vals))
		}
		out = append(out, Figure{Name: "memory", Title: lc.Title, SVG: lc.svg(),
			Caption: "MEMORY USAGE per key against the same values stored uncompressed, over keys holding distinct values. Dashed: with a dictionary trained on other values of the size; dotted: keys written with " + codec.DefaultAlgorithm.String() + " and then compacted (squeeze compact)."})
	}

	// 3. Time per write and per read against no compression, per size.
	ratios := TimeRatios(r.Redis)
	var tsizes []int
	for _, t := range ratios {
		if t.Path == a.Path {
			tsizes = append(tsizes, t.SizeBytes)
		}
	}
	tsizes = compressedSizes(tsizes)
	for _, wl := range []string{WorkloadWrite, WorkloadRead} {
		if len(tsizes) == 0 {
			break
		}
		verb := map[string]string{WorkloadWrite: "Write", WorkloadRead: "Read"}[wl]
		lc := lineChart{Title: verb + " time against no compression, by value size", XLabel: "value size",
			YLabel: "× the time without compression", Categories: sizeNames(tsizes), YLog: true, YTick: timesTick,
			Refs: []refLine{{Y: 1, Label: "no compression (1×)", Color: svgPalette[0]}}}
		var order []string
		for _, t := range ratios {
			if t.Path == a.Path && t.Workload == wl && !contains(order, t.Codec) {
				order = append(order, t.Codec)
			}
		}
		for _, c := range order {
			vals := nanValues(len(tsizes))
			for _, t := range ratios {
				if t.Path == a.Path && t.Workload == wl && t.Codec == c {
					if i := indexInt(tsizes, t.SizeBytes); i >= 0 {
						vals[i] = t.X
					}
				}
			}
			lc.Series = append(lc.Series, style.series(c, vals))
		}
		what := map[string]string{WorkloadWrite: "compress + SET", WorkloadRead: "GET + decompress"}[wl]
		out = append(out, Figure{Name: "time-" + wl, Title: lc.Title, SVG: lc.svg(),
			Caption: fmt.Sprintf("Time per %s with each codec divided by the time per SET or GET without compression (%s path; median of repeats at the largest iteration count both reached; log scale). 2× is twice the time.", what, a.Path)})
	}
	return out
}

func nanValues(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.NaN()
	}
	return v
}

func indexInt(list []int, v int) int {
	for i, x := range list {
		if x == v {
			return i
		}
	}
	return -1
}
