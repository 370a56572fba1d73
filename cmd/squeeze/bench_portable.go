package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/squeeze-kv/squeeze/bench"
	"github.com/squeeze-kv/squeeze/codec"
)

// portableCost is one line of "bench redis --portable": the portable
// profile's codec against the default one on one path, workload and size,
// from the same run.
type portableCost struct {
	path, workload string
	size           int
	iterations     int     // the largest count both were measured at
	timeRatio      float64 // the portable codec's time per operation over the default's
}

// portableCosts pairs the rows of codecs def and port measured at the same
// path, workload, size and iteration count, and keeps for each path,
// workload and size the pair at the largest count, in the rows' order.
func portableCosts(rows []bench.RedisRow, def, port string) []portableCost {
	type key struct {
		path, wl         string
		size, iterations int
	}
	defs := map[key]bench.RedisRow{}
	for _, r := range rows {
		if r.Codec == def {
			defs[key{r.Path, r.Workload, r.SizeBytes, r.Iterations}] = r
		}
	}
	var out []portableCost
	for _, r := range rows {
		d, ok := defs[key{r.Path, r.Workload, r.SizeBytes, r.Iterations}]
		if r.Codec != port || !ok || d.NsPerOp <= 0 {
			continue
		}
		c := portableCost{path: r.Path, workload: r.Workload, size: r.SizeBytes, iterations: r.Iterations, timeRatio: r.NsPerOp / d.NsPerOp}
		i := slices.IndexFunc(out, func(o portableCost) bool { return o.path == c.path && o.workload == c.workload && o.size == c.size })
		switch {
		case i < 0:
			out = append(out, c)
		case c.iterations > out[i].iterations:
			out[i] = c
		}
	}
	return out
}

// printPortableCost prints what writing the portable profile's default
// codec costs against the default codec in one run: time per operation as
// a ratio, per path, workload and size, and the memory each saves.
func printPortableCost(w io.Writer, res bench.RedisResult) {
	def, port := codec.DefaultAlgorithm.String(), codec.PortableDefault.String()
	costs := portableCosts(res.Rows, def, port)
	if len(costs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nThe portable profile (--portable writes %s) against the default (%s), measured together\n", port, def)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "Workload\tSize\tPath\tIterations\tTime, portable / default\t")
	for _, c := range costs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.2fx\t\n", c.workload, bench.FormatSize(int64(c.size)), c.path, c.iterations, c.timeRatio)
	}
	tw.Flush()
	saved := map[string]map[int]float64{def: {}, port: {}}
	var sizes []int
	for _, m := range res.Memory {
		if s, ok := saved[m.Codec]; ok && m.WrittenWith == "" {
			s[m.SizeBytes] = m.SavedPct
			if !slices.Contains(sizes, m.SizeBytes) {
				sizes = append(sizes, m.SizeBytes)
			}
		}
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "Size\tSaved, default\tSaved, portable\tPoints lost\t")
	for _, size := range sizes {
		d, okd := saved[def][size]
		p, okp := saved[port][size]
		if okd && okp && size > 0 {
			fmt.Fprintf(tw, "%s\t%.1f%%\t%.1f%%\t%.1f\t\n", bench.FormatSize(int64(size)), d, p, d-p)
		}
	}
	tw.Flush()
}
