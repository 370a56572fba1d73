// Package bench holds squeeze's measurement studies: the built-in generated
// corpus, corpus loading, the workloads behind "squeeze bench codecs",
// "squeeze bench redis" and "squeeze bench docs", their result rows, the
// statistics over repeated runs and the HTML report writer.
//
// The package is shared by the CLI and the tests, so every workload is bounded
// in count and time and reports progress through a callback instead of
// printing.
//
// # Method
//
//   - Codecs (RunCodecs): every value of the corpus is compressed and
//     decompressed in whole rounds until a minimum time has passed; the
//     median round is reported, and every round trip is compared byte for
//     byte. The raw-storage policy is off, so sizes are the codec's own plus
//     the frame header.
//   - Redis (RunRedis, seed 000): for each value size, workload and iteration
//     count, the variants (direct go-redis; squeeze's codec in-process with
//     none and each codec) run one repeat each in turn, rotating the order,
//     so that noise on a shared machine hits them alike; medians of the
//     repeats are reported. Larger iteration counts are skipped when the time
//     measured at the previous count predicts more than the cell budget.
//     Memory is measured after the server settles: MEMORY USAGE per key, and
//     the used_memory and used_memory_dataset deltas over enough keys to hold
//     at least 1 MB. MEMORY USAGE counts allocator size classes, so two
//     codecs whose outputs fall in one class show the same figure.
//   - Documents (RunDocs, seed 001): upload is compress + SET, download is
//     GET + decompress, medians of repeats, every download checked. The
//     shaped link (StartShapedLink) is a network namespace joined by a veth
//     pair under tc netem, or tc tbf (rate only) on kernels without netem.
//
// Seed figures (SeedSlowdowns) are the articles' own and are printed beside
// the measured ones, never mixed into them.
package bench

// Progress is called after each finished unit of work with the number done
// and the total. A nil Progress is ignored.
type Progress func(done, total int)

func (p Progress) step(done, total int) {
	if p != nil {
		p(done, total)
	}
}
