package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/squeeze-kv/squeeze/bench"
)

// textWidth is where printed paragraphs wrap.
const textWidth = 100

// unitWord matches a size unit after a number ("4.2 MB;", "16.6 kB-4.2
// MB"), which wrap keeps on the number's line.
var unitWord = regexp.MustCompile(`^(B|kB|MB|GB|KiB|MiB|GiB)([-.,;:)].*)?$`)

// wrap breaks text into lines of at most width columns, the first
// starting with first, the others with indent.
func wrap(text, first, indent string, width int) string {
	var words []string
	for _, w := range strings.Fields(text) {
		if n := len(words); n > 0 && unitWord.MatchString(w) && strings.ContainsAny(words[n-1][len(words[n-1])-1:], "0123456789") {
			words[n-1] += " " + w
			continue
		}
		words = append(words, w)
	}
	var b strings.Builder
	line := first
	empty := true
	for _, word := range words {
		if !empty && len([]rune(line))+1+len([]rune(word)) > width {
			b.WriteString(line + "\n")
			line, empty = indent, true
		}
		if !empty {
			line += " "
		}
		line += word
		empty = false
	}
	b.WriteString(line + "\n")
	return b.String()
}

// printRecommendation prints the advice under a heading: one bullet per
// instruction, then why the write codec was chosen.
func printRecommendation(w io.Writer, a *bench.Advice, heading string) {
	fmt.Fprintln(w, heading)
	for _, l := range a.Lines() {
		fmt.Fprint(w, wrap(l.Lead+l.Rest, "  * ", "    ", textWidth))
	}
	fmt.Fprint(w, wrap(a.Why(), "  ", "  ", textWidth))
}

// printEvidence prints what the advice rests on: memory saved per codec
// and size, then write and read time against no compression on the
// advice's path.
func printEvidence(w io.Writer, res bench.RedisResult, a *bench.Advice) {
	var sizes []int
	for _, m := range res.Memory {
		if m.SizeBytes >= 64 && !containsSize(sizes, m.SizeBytes) {
			sizes = append(sizes, m.SizeBytes)
		}
	}
	header := func(tw io.Writer, title string) {
		fmt.Fprint(tw, title)
		for _, s := range sizes {
			fmt.Fprintf(tw, "\t%s", bench.FormatSize(int64(s)))
		}
		fmt.Fprintln(tw, "\t")
	}
	var codecs []string
	saved := map[string]map[int]float64{}
	for _, m := range res.Memory {
		if m.Codec == "none" || m.SizeBytes < 64 {
			continue
		}
		if saved[m.Codec] == nil {
			saved[m.Codec] = map[int]float64{}
			codecs = append(codecs, m.Codec)
		}
		saved[m.Codec][m.SizeBytes] = m.SavedPct
	}
	ratios := bench.TimeRatios(res.Rows)
	// Names are padded to one width, so that they read left-aligned in
	// columns aligned right.
	width := len("Write time, x none")
	for _, c := range codecs {
		width = max(width, len(c))
	}
	for _, t := range ratios {
		width = max(width, len(t.Codec))
	}
	name := func(s string) string { return fmt.Sprintf("  %-*s", width, s) }
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', tabwriter.AlignRight)
	header(tw, name("Memory saved"))
	for _, c := range codecs {
		fmt.Fprint(tw, name(c))
		for _, s := range sizes {
			if v, ok := saved[c][s]; ok {
				fmt.Fprintf(tw, "\t%.0f%%", v)
			} else {
				fmt.Fprint(tw, "\t-")
			}
		}
		fmt.Fprintln(tw, "\t")
	}
	for _, wl := range []string{bench.WorkloadWrite, bench.WorkloadRead} {
		fmt.Fprintln(tw, "\t")
		header(tw, name(map[string]string{bench.WorkloadWrite: "Write time, x none", bench.WorkloadRead: "Read time, x none"}[wl]))
		var order []string
		x := map[string]map[int]float64{}
		for _, t := range ratios {
			if t.Path != a.Path || t.Workload != wl {
				continue
			}
			if x[t.Codec] == nil {
				x[t.Codec] = map[int]float64{}
				order = append(order, t.Codec)
			}
			x[t.Codec][t.SizeBytes] = t.X
		}
		for _, c := range order {
			fmt.Fprint(tw, name(c))
			for _, s := range sizes {
				if v, ok := x[c][s]; ok && !math.IsNaN(v) {
					fmt.Fprintf(tw, "\t%.1fx", v)
				} else {
					fmt.Fprint(tw, "\t-")
				}
			}
			fmt.Fprintln(tw, "\t")
		}
	}
	tw.Flush()
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		fmt.Fprint(w, strings.TrimRight(line, " \n")+strings.Repeat("\n", strings.Count(line, "\n")))
	}
}

func containsSize(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
