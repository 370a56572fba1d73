package bench

import (
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Report is everything one run of a study measured. Empty parts are left out
// of the written report.
type Report struct {
	Title   string `json:"title"`
	Command string `json:"command"`
	Corpus  string `json:"corpus,omitempty"`
	// Values says what the values were and where they were measured
	// ("generated JSON documents of 1 kB-4.2 MB, Redis 7.0.15"): the
	// first line under the title.
	Values     string         `json:"values,omitempty"`
	Generated  time.Time      `json:"generated"`
	Notes      []string       `json:"notes,omitempty"`
	Codecs     []CodecResult  `json:"codecs,omitempty"`
	Redis      []RedisRow     `json:"redis,omitempty"`
	Memory     []MemoryRow    `json:"memory,omitempty"`
	Docs       []DocRow       `json:"docs,omitempty"`
	Crossovers []Crossover    `json:"crossovers,omitempty"`
	Seed       []SeedSlowdown `json:"seed_slowdowns,omitempty"`
	// Targets are the figures squeeze was built to reach, checked on this
	// run, and TargetNotes what explains them: for squeeze's developers,
	// shown at the end of the report, folded.
	Targets     []TargetCheck `json:"targets,omitempty"`
	TargetNotes []string      `json:"target_notes,omitempty"`
	// Advice is what the Redis rows recommend (Recommend); WriteReport
	// fills it in when it is nil.
	Advice *Advice `json:"advice,omitempty"`
	// Tables and Bars carry the results of studies without a section of
	// their own (counters, compact).
	Tables []Table    `json:"tables,omitempty"`
	Bars   []BarChart `json:"-"`
}

// Chart is one written chart: PNG and SVG files in the report's charts/
// directory.
type Chart struct {
	Name    string // file name without extension
	Title   string
	Caption string
	PNG     string // path relative to the report directory
	SVG     string
	png     []byte
}

// WriteReport writes r into dir (created if needed): index.html, which
// opens from disk without network, the raw results as results.json and one
// CSV per table, and each chart in charts/. A Redis study's page opens with
// its advice (Recommend) and SVG charts drawn into the page (the trade-off,
// memory saved, write and read time against no compression), also written
// as charts/NAME.svg; the other studies' charts are drawn with gonum/plot,
// embedded as PNG data and written as charts/NAME.png and .svg.
func WriteReport(dir string, r Report) error {
	if r.Generated.IsZero() {
		r.Generated = time.Now().UTC()
	}
	if len(r.Redis) > 0 && r.Seed == nil {
		r.Seed = SeedSlowdowns
	}
	if r.Advice == nil && len(r.Redis) > 0 {
		r.Advice = Recommend(r.Redis, r.Memory)
	}
	if err := os.MkdirAll(filepath.Join(dir, "charts"), 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	csvs := []struct {
		name string
		rows any
	}{{"codecs", r.Codecs}, {"redis", r.Redis}, {"memory", r.Memory}, {"docs", r.Docs}, {"crossovers", r.Crossovers}}
	for _, t := range r.Tables {
		csvs = append(csvs, struct {
			name string
			rows any
		}{t.Name, t.Rows})
	}
	var csvFiles []string
	for _, c := range csvs {
		if reflect.ValueOf(c.rows).Len() == 0 {
			continue
		}
		name := c.name + ".csv"
		if err := writeCSV(filepath.Join(dir, name), c.rows); err != nil {
			return fmt.Errorf("report: %s: %w", name, err)
		}
		csvFiles = append(csvFiles, name)
	}
	charts, err := drawCharts(dir, r)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	data := reportPage{Report: r, Charts: charts, CSVFiles: csvFiles, SeedRows: seedComparison(r), TablesHTML: htmlTables(r.Tables),
		SeedSentence: SeedSentence}
	if a := r.Advice; a != nil {
		data.AdviceLines, data.Why = a.Lines(), a.Why()
		for _, fig := range adviceFigures(r, a) {
			if err := os.WriteFile(filepath.Join(dir, "charts", fig.Name+".svg"), []byte(svgFileHeader+string(fig.SVG)+"\n"), 0o644); err != nil {
				return fmt.Errorf("report: %w", err)
			}
			if fig.Name == "tradeoff" || fig.Name == "memory" {
				data.FirstFigures = append(data.FirstFigures, fig)
			} else {
				data.Figures = append(data.Figures, fig)
			}
		}
		data.CostSizes, data.Costs = costTable(r.Redis)
	}
	f, err := os.Create(filepath.Join(dir, "index.html"))
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := pageTemplate.Execute(f, data); err != nil {
		f.Close()
		return fmt.Errorf("report: index.html: %w", err)
	}
	return f.Close()
}

// writeCSV writes a slice of structs as CSV with the JSON field names as
// header.
func writeCSV(path string, rows any) error {
	v := reflect.ValueOf(rows)
	header, idx := tableColumns(v.Type().Elem())
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write(header)
	for i := 0; i < v.Len(); i++ {
		rec := make([]string, len(idx))
		for j, fi := range idx {
			switch x := v.Index(i).Field(fi).Interface().(type) {
			case float64:
				rec[j] = strconv.FormatFloat(x, 'f', -1, 64)
			default:
				rec[j] = fmt.Sprint(x)
			}
		}
		w.Write(rec)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// SeedRow puts one seed figure beside the measured slowdowns of zlib:6 (the
// seed's approach) and of the other codecs, on the library path.
type SeedRow struct {
	Workload  string
	Size      string        // the seed's size, printed
	SeedPct   float64       // the seed's slowdown
	Measured  []MeasuredPct // zlib:6 first, then the other codecs by name
	HasMeasur bool          // whether the run measured this workload and size
}

// MeasuredPct is one measured slowdown.
type MeasuredPct struct {
	Codec      string
	Pct        float64
	Iterations int
}

// seedComparison pairs each seed figure with the measured slowdowns of the
// library path at the largest iteration count every codec reached for that
// workload and size.
func seedComparison(r Report) []SeedRow {
	if len(r.Redis) == 0 {
		return nil
	}
	var out []SeedRow
	for _, s := range r.Seed {
		row := SeedRow{Workload: s.Workload, Size: FormatSize(int64(s.SizeBytes)), SeedPct: s.SlowdownPct}
		// Compare the codecs at the largest iteration count they all reached.
		byIters := map[int]map[string]RedisRow{}
		codecs := map[string]bool{}
		for _, x := range r.Redis {
			if x.Path != PathLibrary || x.Workload != s.Workload || x.Codec == "none" || !sizeMatches(x.SizeBytes, s.SizeBytes) {
				continue
			}
			codecs[x.Codec] = true
			if x.NoBaseline {
				continue // no slowdown to compare at this count
			}
			if byIters[x.Iterations] == nil {
				byIters[x.Iterations] = map[string]RedisRow{}
			}
			byIters[x.Iterations][x.Codec] = x
		}
		best := map[string]RedisRow{}
		for n, m := range byIters {
			if len(m) == len(codecs) {
				for c, x := range m {
					if b, ok := best[c]; !ok || n > b.Iterations {
						best[c] = x
					}
				}
			}
		}
		var names []string
		for n := range best {
			names = append(names, n)
		}
		sort.Slice(names, func(i, j int) bool { // zlib:6 first: it is the seed's approach
			if (names[i] == "zlib:6") != (names[j] == "zlib:6") {
				return names[i] == "zlib:6"
			}
			return names[i] < names[j]
		})
		for _, n := range names {
			row.Measured = append(row.Measured, MeasuredPct{n, best[n].SlowdownPct, best[n].Iterations})
		}
		row.HasMeasur = len(row.Measured) > 0
		out = append(out, row)
	}
	return out
}

// sizeMatches reports whether a measured size is the seed's size (within 2%,
// since the seed's sizes are rounded).
func sizeMatches(measured, seed int) bool {
	if seed == 0 {
		return measured == 0
	}
	return math.Abs(float64(measured-seed)) <= 0.02*float64(seed)
}

var palette = []color.Color{
	color.RGBA{0x44, 0x44, 0x44, 0xff}, // none: grey
	color.RGBA{0x1f, 0x77, 0xb4, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff},
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xff, 0x7f, 0x0e, 0xff},
	color.RGBA{0x94, 0x67, 0xbd, 0xff},
	color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff},
	color.RGBA{0x17, 0xbe, 0xcf, 0xff},
	color.RGBA{0xbc, 0xbd, 0x22, 0xff},
}

func colorFor(i int) color.Color { return palette[i%len(palette)] }

func drawCharts(dir string, r Report) ([]Chart, error) {
	var charts []Chart
	save := func(p *plot.Plot, name, title, caption string, w, h vg.Length) error {
		c := Chart{Name: name, Title: title, Caption: caption, PNG: "charts/" + name + ".png", SVG: "charts/" + name + ".svg"}
		widenFlatAxis(&p.X)
		widenFlatAxis(&p.Y)
		if err := p.Save(w, h, filepath.Join(dir, c.PNG)); err != nil {
			return fmt.Errorf("chart %s: %w", name, err)
		}
		if err := p.Save(w, h, filepath.Join(dir, c.SVG)); err != nil {
			return fmt.Errorf("chart %s: %w", name, err)
		}
		b, err := os.ReadFile(filepath.Join(dir, c.PNG))
		if err != nil {
			return err
		}
		c.png = b
		charts = append(charts, c)
		return nil
	}
	if len(r.Codecs) > 0 {
		p, err := codecScatter(r.Codecs)
		if err != nil {
			return nil, err
		}
		if err := save(p, "codecs", "Codec trade-off", "Ratio against compression speed, one point per codec and level (log scale).", 8*vg.Inch, 5.5*vg.Inch); err != nil {
			return nil, err
		}
	}
	for _, bc := range r.Bars {
		p, err := drawBarChart(bc)
		if err != nil {
			return nil, err
		}
		if err := save(p, bc.Name, bc.Title, bc.Caption, 7*vg.Inch, 4.5*vg.Inch); err != nil {
			return nil, err
		}
	}
	if len(r.Docs) > 0 {
		for _, link := range distinctLinks(r.Docs) {
			for _, dirn := range []string{"upload", "download"} {
				p, err := docsChart(r.Docs, link, dirn)
				if err != nil {
					return nil, err
				}
				name := "docs-" + sanitize(link) + "-" + dirn
				if err := save(p, name, fmt.Sprintf("%s time on %s", dirn, link),
					"Transfer time (with compression) against JSON document size, per codec (log-log; median of repeats).", 7*vg.Inch, 4.5*vg.Inch); err != nil {
					return nil, err
				}
			}
		}
	}
	return charts, nil
}

// widenFlatAxis gives an axis whose data is a single value (one iteration
// count, one size) a range around it: a log scale cannot draw an empty range.
func widenFlatAxis(a *plot.Axis) {
	if a.Min < a.Max {
		return
	}
	if _, isLog := a.Scale.(plot.LogScale); isLog && a.Min > 0 {
		a.Min, a.Max = a.Min/2, a.Max*2
		return
	}
	a.Min, a.Max = a.Min-1, a.Max+1
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(s))
}

func codecScatter(rows []CodecResult) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Codecs: ratio vs compression speed"
	p.X.Label.Text = "compress MB/s"
	p.Y.Label.Text = "ratio"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	var xys plotter.XYs
	var labels []string
	for _, r := range rows {
		if r.CompressMBs <= 0 || r.Codec == "none" {
			continue
		}
		xys = append(xys, plotter.XY{X: r.CompressMBs, Y: r.Ratio})
		labels = append(labels, r.Algorithm)
	}
	if len(xys) == 0 {
		xys = append(xys, plotter.XY{X: 1, Y: 1})
		labels = append(labels, "no data")
	}
	sc, err := plotter.NewScatter(xys)
	if err != nil {
		return nil, err
	}
	sc.GlyphStyle.Color = colorFor(1)
	sc.GlyphStyle.Radius = vg.Points(3)
	lb, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return nil, err
	}
	for i := range lb.TextStyle {
		lb.TextStyle[i].Font.Size = vg.Points(7)
		lb.TextStyle[i].XAlign = -0.1
	}
	p.Add(sc, lb, plotter.NewGrid())
	return p, nil
}

func distinctSizes(rows []RedisRow) []int {
	m := map[int]bool{}
	for _, r := range rows {
		m[r.SizeBytes] = true
	}
	var out []int
	for s := range m {
		out = append(out, s)
	}
	sort.Ints(out)
	return out
}

func distinctLinks(rows []DocRow) []string {
	var out []string
	for _, r := range rows {
		if !contains(out, r.Link) {
			out = append(out, r.Link)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// series groups rows by a label in first-seen order, with "none" first.
func seriesOrder(labels []string) []string {
	var out []string
	for _, l := range labels {
		if strings.HasSuffix(l, "none") && !contains(out, l) {
			out = append(out, l)
		}
	}
	for _, l := range labels {
		if !contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func docsChart(rows []DocRow, link, direction string) (*plot.Plot, error) {
	pts := map[string]plotter.XYs{}
	var labels []string
	for _, r := range rows {
		if r.Link != link {
			continue
		}
		v := r.UploadMs
		if direction == "download" {
			v = r.DownloadMs
		}
		if v <= 0 || r.SizeBytes <= 0 {
			continue
		}
		labels = append(labels, r.Codec)
		pts[r.Codec] = append(pts[r.Codec], plotter.XY{X: float64(r.SizeBytes) / 1e6, Y: v})
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s on %s", direction, link)
	p.X.Label.Text = "document size (MB)"
	p.Y.Label.Text = direction + " time (ms)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	for i, l := range seriesOrder(labels) {
		xy := pts[l]
		sort.Slice(xy, func(a, b int) bool { return xy[a].X < xy[b].X })
		line, points, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, err
		}
		line.Color, points.Color = colorFor(i), colorFor(i)
		if l == "none" {
			line.Width = vg.Points(2)
		}
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(l, line, points)
	}
	p.Add(plotter.NewGrid())
	return p, nil
}

type reportPage struct {
	Report
	Charts       []Chart
	CSVFiles     []string
	SeedRows     []SeedRow
	TablesHTML   []tableHTML
	AdviceLines  []AdviceLine
	Why          string
	FirstFigures []Figure // on the first screen, beside the advice
	Figures      []Figure
	CostSizes    []string
	Costs        []costRow
	SeedSentence string
}

// svgFileHeader starts a chart written on its own as charts/NAME.svg.
const svgFileHeader = `<?xml version="1.0" encoding="UTF-8"?>` + "\n"

// costRow is one line of the report's table of time against no
// compression: a path and codec, the write and read ratio per size.
type costRow struct {
	Path, Codec string
	Cells       []string // per costSizes entry: "2.2× / 1.3×", or "" when not measured
}

// costTable returns the sizes (columns) and the time ratios per path and
// codec: "write / read" per size.
func costTable(rows []RedisRow) ([]string, []costRow) {
	ratios := TimeRatios(rows)
	var sizes []int
	for _, t := range ratios {
		sizes = append(sizes, t.SizeBytes)
	}
	sizes = compressedSizes(sizes)
	type key struct{ path, codec string }
	var order []key
	cells := map[key][]string{}
	for _, t := range ratios {
		i := indexInt(sizes, t.SizeBytes)
		if i < 0 || t.Workload == WorkloadReadWrite {
			continue
		}
		k := key{t.Path, t.Codec}
		if cells[k] == nil {
			order = append(order, k)
			cells[k] = make([]string, 2*len(sizes))
		}
		j := 2 * i
		if t.Workload == WorkloadRead {
			j++
		}
		cells[k][j] = times(t.X)
	}
	var out []costRow
	for _, k := range order {
		row := costRow{Path: k.path, Codec: k.codec}
		c := cells[k]
		for i := range sizes {
			w, r := c[2*i], c[2*i+1]
			if w == "" && r == "" {
				row.Cells = append(row.Cells, "")
				continue
			}
			row.Cells = append(row.Cells, orDash(w)+" / "+orDash(r))
		}
		out = append(out, row)
	}
	return sizeNames(sizes), out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// DataURI returns the chart's PNG as a data: URL, so that index.html needs
// no other file to show it.
func (c Chart) DataURI() template.URL {
	return template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(c.png))
}

var pageTemplate = template.Must(template.New("index").Funcs(template.FuncMap{
	"size": func(n int) string { return FormatSize(int64(n)) },
	"f1":   func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"f2":   func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) },
	"pct": func(f float64) string {
		return fmt.Sprintf("%+.1f%%", f)
	},
	"cross": func(n int) string {
		if n < 0 {
			return "never (in the sizes measured)"
		}
		return "from " + FormatSize(int64(n))
	},
	"int64": func(n int64) string { return strconv.FormatInt(n, 10) },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{if .Advice}}What to use: {{end}}{{.Title}}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 1.2em auto; max-width: 1110px; padding: 0 12px; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; margin: 0 0 0.15em; }
h2 { font-size: 1.25em; margin: 1.4em 0 0.5em; }
p.meta { color: #555; margin: 0 0 0.8em; font-size: 0.92em; }
section.answer { background: #f2f7ee; border: 1px solid #b9d3a8; border-radius: 6px; padding: 0.55em 1.1em 0.6em; }
section.answer h2 { margin: 0.2em 0 0.3em; }
section.answer ul { margin: 0.2em 0 0.4em; padding-left: 1.2em; }
section.answer li { margin: 0.25em 0; font-size: 1.05em; }
section.answer p.why { margin: 0.3em 0 0.1em; color: #444; font-size: 0.92em; }
.charts { display: flex; flex-wrap: wrap; gap: 10px; margin: 0.8em 0; }
.charts figure { margin: 0; flex: 0 1 540px; }
.charts svg { max-width: 100%; height: auto; border: 1px solid #e5e5e5; }
.charts figcaption { font-size: 0.85em; color: #555; margin-top: 2px; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 90%; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f3f3f3; }
td.l, th.l { text-align: left; }
figure.png { display: inline-block; margin: 0.5em; vertical-align: top; }
figure.png img { max-width: 100%; border: 1px solid #eee; }
figure.png figcaption { font-size: 85%; color: #555; max-width: 500px; }
code { background: #f6f6f6; padding: 1px 4px; }
details { margin: 1em 0; }
details > summary { cursor: pointer; font-weight: 600; }
.worse { color: #b00; } .better { color: #070; }
</style>
</head>
<body>
{{if .Advice}}<h1>What to use, measured on this machine</h1>
<p class="meta">{{if .Values}}{{.Values}} · {{end}}{{.Generated.Format "2006-01-02 15:04 UTC"}} · <code>{{.Command}}</code>{{if .Corpus}} · corpus: {{.Corpus}}{{end}}</p>
<section class="answer" id="answer">
<h2>Recommendation</h2>
<ul>
{{range .AdviceLines}}<li><b>{{.Lead}}</b>{{.Rest}}</li>
{{end}}</ul>
<p class="why">{{.Why}}</p>
</section>
<div class="charts">
{{range .FirstFigures}}<figure id="{{.Name}}">{{.SVG}}<figcaption>{{.Caption}}</figcaption></figure>
{{end}}</div>
{{if .Figures}}<h2>Time per operation against no compression</h2>
<div class="charts">
{{range .Figures}}<figure id="{{.Name}}">{{.SVG}}<figcaption>{{.Caption}}</figcaption></figure>
{{end}}</div>{{end}}
{{if .Costs}}<table>
<tr><th class="l">path</th><th class="l">codec</th>{{range .CostSizes}}<th>{{.}}<br>write / read</th>{{end}}</tr>
{{range .Costs}}<tr><td class="l">{{.Path}}</td><td class="l">{{.Codec}}</td>{{range .Cells}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
<p>Paths: <i>library</i> is the codec in the application around go-redis (what the squeeze Go library does), <i>proxy</i> goes through a squeeze proxy on loopback; each against no compression on the same path.</p>{{end}}
<h2>About these measurements</h2>
{{else}}<h1>{{.Title}}</h1>
<p class="meta">Command: <code>{{.Command}}</code> · generated {{.Generated.Format "2006-01-02 15:04:05 UTC"}}{{if .Corpus}} · corpus: {{.Corpus}}{{end}}</p>
{{end}}
{{range .Notes}}<p>{{.}}</p>{{end}}
<p>Raw results: <a href="results.json">results.json</a>{{range .CSVFiles}}, <a href="{{.}}">{{.}}</a>{{end}}. Every chart is also in charts/.</p>

{{range .TablesHTML}}
<h2>{{.Title}}</h2>
<table><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Cells}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
{{end}}

{{if .Memory}}
<h2>Memory in Redis</h2>
<p>Mean per key over keys holding distinct values of each size. A codec written "a->b" is measured at rest: keys written with a (what the proxy and the library write), then recompressed to b by the code of <code>squeeze compact</code>.</p>
<table>
<tr><th class="l">codec</th><th>value size</th><th>stored bytes</th><th>MEMORY USAGE / key</th><th>used_memory delta / key</th><th>dataset delta / key</th><th>saved (MEMORY USAGE)</th><th>saved (used_memory)</th><th>saved (dataset)</th></tr>
{{range .Memory}}<tr><td class="l">{{.Codec}}</td><td>{{size .SizeBytes}}</td><td>{{.StoredBytes}}</td><td>{{f1 .MemoryUsageBytes}}</td><td>{{f1 .UsedMemoryDeltaBytes}}</td><td>{{f1 .DatasetDeltaBytes}}</td><td>{{f1 .SavedPct}}%</td><td>{{f1 .UsedMemorySavedPct}}%</td><td>{{f1 .DatasetSavedPct}}%</td></tr>
{{end}}</table>
{{end}}

{{if .Crossovers}}
<h2>Where compression makes transfers faster</h2>
<table>
<tr><th class="l">codec</th><th class="l">link</th><th class="l">direction</th><th class="l">faster than no compression</th></tr>
{{range .Crossovers}}<tr><td class="l">{{.Codec}}</td><td class="l">{{.Link}}</td><td class="l">{{.Direction}}</td><td class="l">{{cross .SizeBytes}}</td></tr>
{{end}}</table>
{{end}}

{{if .Docs}}
<h2>Document transfers</h2>
<table>
<tr><th class="l">codec</th><th class="l">link</th><th>size</th><th>stored</th><th>upload ms</th><th>vs none</th><th>download ms</th><th>vs none</th></tr>
{{range .Docs}}<tr><td class="l">{{.Codec}}</td><td class="l">{{.Link}}</td><td>{{size .SizeBytes}}</td><td>{{size .StoredBytes}}</td><td>{{f2 .UploadMs}}</td><td>{{pct .UploadPct}}</td><td>{{f2 .DownloadMs}}</td><td>{{pct .DownloadPct}}</td></tr>
{{end}}</table>
{{end}}

{{if .Codecs}}
<h2>Codec table</h2>
<table>
<tr><th class="l">codec</th><th>level</th><th>time (ms)</th><th>result (bytes)</th><th>improvement</th><th>compress MB/s</th><th>decompress MB/s</th><th>ratio</th></tr>
{{range .Codecs}}<tr><td class="l">{{.Codec}}</td><td>{{.Level}}{{if .Slow}} (slow){{end}}</td><td>{{f2 .CompressMs}}</td><td>{{int64 .OutputBytes}}</td><td>{{f2 .ImprovementPct}}%</td><td>{{f1 .CompressMBs}}</td><td>{{f1 .DecompressMBs}}</td><td>{{f2 .Ratio}}</td></tr>
{{end}}</table>
{{end}}

{{if .Charts}}
<h2>Charts</h2>
{{range .Charts}}<figure class="png" id="{{.Name}}"><img src="{{.DataURI}}" alt="{{.Title}}"><figcaption><b>{{.Title}}</b>. {{.Caption}} <a href="{{.SVG}}">SVG</a> · <a href="{{.PNG}}">PNG</a></figcaption></figure>
{{end}}
{{end}}

{{if .Redis}}
<details id="cells">
<summary>Every Redis cell ({{len .Redis}})</summary>
<p>Total time for all iterations and time per operation, median of repeats; slowdown against no compression on the same path at the same iteration count.</p>
<table>
<tr><th class="l">path</th><th class="l">codec</th><th class="l">workload</th><th>size</th><th>iterations</th><th>repeats</th><th>total ms (median)</th><th>ns/op</th><th>slowdown</th><th>memory saved</th></tr>
{{range .Redis}}<tr><td class="l">{{.Path}}</td><td class="l">{{.Codec}}</td><td class="l">{{.Workload}}</td><td>{{size .SizeBytes}}</td><td>{{.Iterations}}</td><td>{{.Repeats}}</td><td>{{f2 .TotalMs}}</td><td>{{f1 .NsPerOp}}</td><td>{{pct .SlowdownPct}}</td><td>{{f1 .MemorySavedPct}}%</td></tr>
{{end}}</table>
</details>
{{end}}

{{if or .Targets .SeedRows}}
<details id="targets">
<summary>For squeeze's developers: the figures squeeze was built to reach, and the seed studies</summary>
<p>{{.SeedSentence}} The figures to reach are the goals squeeze's development checks itself against; they say nothing about what to use on your data, which the recommendation at the top does.</p>
{{range .TargetNotes}}<p>{{.}}</p>{{end}}
{{if .Targets}}
<h3>Figures to reach, checked on this run</h3>
<table>
<tr><th class="l">target</th><th>size</th><th class="l">measured</th><th>result</th></tr>
{{range .Targets}}<tr><td class="l">{{.Target}}</td><td>{{size .SizeByte}}</td><td class="l">{{.Measured}}</td><td>{{if .Pass}}<span class="better">met</span>{{else}}<span class="worse">not met</span>{{end}}</td></tr>
{{end}}</table>
{{end}}
{{if .SeedRows}}
<h3>Slowdown from compression: the 2013 Redis study beside this run</h3>
<p>Seed figures are the article's (Ruby, zlib, Pentium 4). Measured figures are the library path against no compression on the same path, at the largest iteration count all codecs reached (in brackets); zlib:6 is the seed's approach.</p>
<table>
<tr><th class="l">workload</th><th>size</th><th>seed (zlib, Ruby)</th><th class="l">measured</th></tr>
{{range .SeedRows}}<tr><td class="l">{{.Workload}}</td><td>{{.Size}}</td><td>{{pct .SeedPct}}</td><td class="l">{{if .HasMeasur}}{{range .Measured}}{{.Codec}}: <b>{{pct .Pct}}</b> (x{{.Iterations}}) &nbsp; {{end}}{{else}}not measured{{end}}</td></tr>
{{end}}</table>
{{end}}
</details>
{{end}}
</body>
</html>
`))
