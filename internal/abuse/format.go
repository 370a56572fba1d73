package abuse

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// iec formats a byte count with binary units (KiB, MiB, GiB), as the
// proxy's size flags are given.
func iec(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 3; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGT"[exp])
}

// table is a short table of text cells, printed in aligned columns with
// two spaces between them, each row indented by two spaces.
type table struct {
	rows [][]string // the header first
}

// newTable starts a table with its header row.
func newTable(header ...string) *table { return &table{rows: [][]string{header}} }

// add appends a row; missing cells print empty, extra ones are kept.
func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// writeTo prints the table to w.
func (t *table) writeTo(w io.Writer) {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range t.rows {
		b.Reset()
		b.WriteString("  ")
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+2))
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}
