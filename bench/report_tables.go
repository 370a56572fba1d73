package bench

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Table is a study's result table in a report: Rows is a slice of structs
// whose columns are their JSON field names. The report writes it as
// NAME.csv and as an HTML table.
type Table struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	Rows  any    `json:"rows"`
}

// BarChart is a grouped bar chart in a report: one bar per series in each
// group.
type BarChart struct {
	Name, Title, Caption, YLabel string
	Groups                       []string
	Series                       []BarSeries
}

// BarSeries is one series of a BarChart: a value per group.
type BarSeries struct {
	Label  string
	Values []float64
}

// tableHTML is a Table ready for the page template.
type tableHTML struct {
	Title  string
	Header []string
	Cells  [][]string
}

// tableColumns returns the JSON names and field indexes of a row type.
func tableColumns(t reflect.Type) (names []string, idx []int) {
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		names = append(names, tag)
		idx = append(idx, i)
	}
	return names, idx
}

// cellText formats one table cell: floats with at most 2 decimals.
func cellText(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'f', 2, 64)
	default:
		return fmt.Sprint(x)
	}
}

// htmlTables renders tables for the page.
func htmlTables(tables []Table) []tableHTML {
	var out []tableHTML
	for _, t := range tables {
		v := reflect.ValueOf(t.Rows)
		if v.Kind() != reflect.Slice || v.Len() == 0 {
			continue
		}
		names, idx := tableColumns(v.Type().Elem())
		th := tableHTML{Title: t.Title, Header: names}
		for i := 0; i < v.Len(); i++ {
			row := make([]string, len(idx))
			for j, fi := range idx {
				row[j] = cellText(v.Index(i).Field(fi).Interface())
			}
			th.Cells = append(th.Cells, row)
		}
		out = append(out, th)
	}
	return out
}

// drawBarChart draws a grouped bar chart with gonum/plot.
func drawBarChart(c BarChart) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = c.Title
	p.Y.Label.Text = c.YLabel
	p.Legend.Top = true
	w := vg.Points(60 / float64(max(1, len(c.Series))))
	top := 0.0
	for si, s := range c.Series {
		if len(s.Values) != len(c.Groups) {
			return nil, fmt.Errorf("bar chart %s: series %q has %d values for %d groups", c.Name, s.Label, len(s.Values), len(c.Groups))
		}
		b, err := plotter.NewBarChart(plotter.Values(s.Values), w)
		if err != nil {
			return nil, fmt.Errorf("bar chart %s: %w", c.Name, err)
		}
		b.Color = colorFor(si)
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(si)-float64(len(c.Series)-1)/2)
		p.Add(b)
		p.Legend.Add(s.Label, b)
		for _, v := range s.Values {
			top = max(top, v)
		}
	}
	p.NominalX(c.Groups...)
	p.Y.Min, p.Y.Max = 0, top*1.25+1 // room for the legend above the bars
	p.Add(plotter.NewGrid())
	return p, nil
}
