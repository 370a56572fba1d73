// Package bench holds squeeze's measurement studies: the built-in generated
// corpus, corpus loading, the workloads behind "squeeze bench codecs",
// "squeeze bench redis" and "squeeze bench docs", their result rows, the
// statistics over repeated runs and the HTML report writer.
//
// The package is shared by the CLI and the tests, so every workload is bounded
// in count and time and reports progress through a callback instead of
// printing.
package bench

// Progress is called after each finished unit of work with the number done
// and the total. A nil Progress is ignored.
type Progress func(done, total int)

func (p Progress) step(done, total int) {
	if p != nil {
		p(done, total)
	}
}
