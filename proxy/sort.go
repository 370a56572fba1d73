package proxy

import "github.com/squeeze-kv/squeeze/internal/valuescript"

// SORT and SORT_RO look at stored bytes in two ways. ALPHA compares them
// (the elements, or with BY pattern the values the pattern fetches), and
// BY and GET patterns put an element's bytes into key names (weight_*,
// data_*->field). Where those bytes are frames, Redis would order
// compressed bytes or look up keys named after them, and the proxy would
// hand back a wrong order or missing values as if they were right.
//
// The proxy sends such a SORT inside a small script instead. The script
// looks at every element (and, with ALPHA and BY, every fetched value) and
// runs Redis's SORT only if none that matters is a frame; otherwise it
// replies with an error that says why, and sorts nothing (with STORE, it
// stores nothing). A numeric SORT without patterns needs no check: the
// write policy stores numbers raw (codec.Numeric), so a frame never holds
// one, and Redis's "can't be converted into double" is the reply Redis
// gives on the values. Lists written raw, and sets and sorted
// sets, whose members the proxy never compresses, sort as before.
//
// The script needs no answer from the proxy, so it travels like any
// command, pipelined and in MULTI. It goes by its text (about 1.5 KB): a
// NOSCRIPT error could not be retried without waiting for it.
const sortCheckScript = valuescript.SortCheck

// sortNeedsCheck reports whether a SORT or SORT_RO call must go through
// sortCheckScript (valuescript.SortNeedsCheck).
func sortNeedsCheck(info *cmdInfo, args [][]byte) (by []byte, alpha, patterns, ok bool) {
	if info.name != "SORT" && info.name != "SORT_RO" {
		return nil, false, false, false
	}
	return valuescript.SortNeedsCheck(args)
}

// appendSortCheck appends EVAL sortCheckScript running the SORT in args.
func appendSortCheck(dst []byte, by []byte, alpha, patterns bool, args [][]byte) []byte {
	return appendWords(dst, valuescript.SortCheckWords(nil, by, alpha, patterns, args))
}
