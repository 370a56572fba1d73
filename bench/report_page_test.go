package bench

import (
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// TestWriteReport_OpensWithAdvice: the report's first section is the
// recommendation, naming the codec the fixed measurements support with
// their figures; the figures to reach and the seed study are folded away
// at the very end.
func TestWriteReport_OpensWithAdvice(t *testing.T) {
	dir := t.TempDir()
	r := measuredReport()
	r.Values = "generated JSON documents of 1 kB-221.9 kB, Redis 7.0.15"
	r.TargetNotes = []string{MemoryContext(RedisResult{Rows: r.Redis, Memory: r.Memory}, "s2:default")}
	if err := WriteReport(dir, r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	body := find(doc, func(n *html.Node) bool { return n.Data == "body" })
	var kids []*html.Node
	for c := body.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode {
			kids = append(kids, c)
		}
	}
	if len(kids) < 4 || kids[0].Data != "h1" || kids[1].Data != "p" || kids[2].Data != "section" || attr(kids[2], "id") != "answer" {
		t.Fatalf("the page does not open with h1, the line on the values, then the answer: %v", nodeNames(kids))
	}
	if meta := text(kids[1]); !strings.HasPrefix(meta, r.Values+" · ") {
		t.Errorf("the line under the title does not say what was measured: %q", meta)
	}
	answer := text(kids[2])
	for _, want := range []string{
		"Recommendation",
		"Write with s2:default",
		"saves 70-74% of Redis memory on values of 16.6 kB-221.9 kB",
		"writes take 2.2x and reads 1.1x the time",
		"Compact cold keys to zstd:9",
		"Use a dictionary for values under 16.6 kB",
		"Why s2:default",
	} {
		if !strings.Contains(answer, want) {
			t.Errorf("answer lacks %q:\n%s", want, answer)
		}
	}
	if b := find(kids[2], func(n *html.Node) bool { return n.Data == "b" }); b == nil || text(b) != "Write with s2:default" {
		t.Errorf("the first instruction is not in bold: %v", b)
	}
	// The charts come right after the answer: the trade-off, with the
	// recommendation marked, and memory saved.
	if kids[3].Data != "div" || attr(kids[3], "class") != "charts" {
		t.Fatalf("no charts after the answer: %v", nodeNames(kids))
	}
	var figs []string
	for c := kids[3].FirstChild; c != nil; c = c.NextSibling {
		if c.Data == "figure" {
			figs = append(figs, attr(c, "id"))
		}
	}
	if strings.Join(figs, ",") != "tradeoff,memory" {
		t.Errorf("first charts %v, want tradeoff,memory", figs)
	}
	mark := find(kids[3], func(n *html.Node) bool { return n.Data == "circle" && attr(n, "class") == "recommended" })
	if mark == nil || !strings.Contains(text(mark.Parent), "s2:default (recommended)") {
		t.Errorf("the trade-off chart does not mark s2:default")
	}
	// The targets and the seed study: one folded section, last.
	last := kids[len(kids)-1]
	if last.Data != "details" || attr(last, "id") != "targets" || hasAttr(last, "open") {
		t.Fatalf("the page does not end with the folded targets: %v", nodeNames(kids))
	}
	page := string(b)
	end := strings.Index(page, `<details id="targets">`)
	for _, dev := range []string{"Figures to reach", "not met", "seed (zlib, Ruby)", "2013", "seed's approach"} {
		if i := strings.Index(page, dev); i >= 0 && i < end {
			t.Errorf("%q appears before the folded section at the end", dev)
		}
		if !strings.Contains(page[end:], dev) {
			t.Errorf("%q missing from the folded section", dev)
		}
	}
	if !strings.Contains(text(last), SeedSentence) {
		t.Error("the folded section does not say what the seed studies are")
	}
}

// TestWriteReport_Charts: every SVG chart is well-formed, titled, has
// both axes labelled with a unit, and a legend whose text is at a normal
// size; the line charts a legend entry per series.
func TestWriteReport_Charts(t *testing.T) {
	dir := t.TempDir()
	if err := WriteReport(dir, measuredReport()); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{ // chart -> legend entries it must have
		"tradeoff":   {"codec as written", "recommended", "cold keys compacted to zstd:9"},
		"memory":     {"s2:default", "zstd:1", "zlib:6", "zstd:1 + dictionary", "compacted to zstd:9", "compacted to zstd:9 + dictionary"},
		"time-write": {"s2:default", "zstd:1", "zlib:6", "zstd:1 + dictionary", "no compression (1×)"},
		"time-read":  {"s2:default", "zstd:1", "zlib:6", "zstd:1 + dictionary", "no compression (1×)"},
	}
	for name, legend := range want {
		f, err := os.Open(filepath.Join(dir, "charts", name+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		c := parseSVG(t, f)
		f.Close()
		if c.title == "" {
			t.Errorf("%s: no title", name)
		}
		for _, axis := range []string{"x", "y"} {
			l := c.axisLabel[axis]
			if l == "" || !strings.ContainsAny(l, "%×") && !strings.Contains(l, "size") {
				t.Errorf("%s: %s axis label %q names no unit", name, axis, l)
			}
		}
		if c.minFont < 12 {
			t.Errorf("%s: text at %v px, want 12 px or more", name, c.minFont)
		}
		if strings.Join(c.legend, "|") != strings.Join(legend, "|") {
			t.Errorf("%s: legend %q, want %q", name, c.legend, legend)
		}
	}
	// The chart files and the charts in the page are the same drawings.
	page, _ := os.ReadFile(filepath.Join(dir, "index.html"))
	for name := range want {
		svg, _ := os.ReadFile(filepath.Join(dir, "charts", name+".svg"))
		body := strings.TrimSpace(strings.TrimPrefix(string(svg), svgFileHeader))
		if !strings.Contains(string(page), body) {
			t.Errorf("%s.svg is not the chart in the page", name)
		}
	}
}

type svgInfo struct {
	title     string
	axisLabel map[string]string
	legend    []string
	minFont   float64
}

// parseSVG reads an SVG document: its title, axis labels, legend texts and
// the smallest font size of any text.
func parseSVG(t *testing.T, r io.Reader) svgInfo {
	t.Helper()
	info := svgInfo{axisLabel: map[string]string{}, minFont: 1e9}
	dec := xml.NewDecoder(r)
	var stack []xml.StartElement
	fonts := []float64{0}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse: %v", err)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			stack = append(stack, x)
			size := fonts[len(fonts)-1]
			for _, a := range x.Attr {
				if a.Name.Local == "font-size" {
					size, _ = strconv.ParseFloat(a.Value, 64)
				}
			}
			fonts = append(fonts, size)
		case xml.EndElement:
			stack, fonts = stack[:len(stack)-1], fonts[:len(fonts)-1]
		case xml.CharData:
			s := strings.TrimSpace(string(x))
			if s == "" || len(stack) == 0 {
				continue
			}
			el := stack[len(stack)-1]
			switch {
			case el.Name.Local == "title":
				info.title = s
				continue
			case el.Name.Local != "text":
				continue
			}
			info.minFont = min(info.minFont, fonts[len(fonts)-1])
			class := xattr(el, "class")
			if axis, ok := strings.CutPrefix(class, "axis-label "); ok {
				info.axisLabel[axis] = s
			}
			for _, p := range stack {
				if xattr(p, "class") == "legend" {
					info.legend = append(info.legend, s)
				}
			}
		}
	}
	return info
}

func xattr(e xml.StartElement, name string) string {
	for _, a := range e.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func find(n *html.Node, ok func(*html.Node) bool) *html.Node {
	if n.Type == html.ElementNode && ok(n) {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if f := find(c, ok); f != nil {
			return f
		}
	}
	return nil
}

func attr(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

func hasAttr(n *html.Node, name string) bool {
	for _, a := range n.Attr {
		if a.Key == name {
			return true
		}
	}
	return false
}

func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

func nodeNames(nodes []*html.Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Data+"#"+attr(n, "id"))
	}
	return out
}
