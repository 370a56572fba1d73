package abuse

import (
	"fmt"
	"time"
)

// latencies summarises one client's round trips: how many, how many
// failed, and the 50th, 99th percentile and largest wait among them (a
// failed round trip's wait counts too).
type latencies struct {
	n, failed     int
	p50, p99, max time.Duration
}

// summarize computes the summary of ds, of which failed failed.
func summarize(ds []time.Duration, failed int) latencies {
	return latencies{n: len(ds), failed: failed, p50: percentile(ds, 0.5), p99: percentile(ds, 0.99), max: percentile(ds, 1)}
}

// cells are the summary as table cells: round trips, failed, p50, p99, max.
func (l latencies) cells() []string {
	if l.n == 0 {
		return []string{"0", fmt.Sprint(l.failed), "-", "-", "-"}
	}
	return []string{fmt.Sprint(l.n), fmt.Sprint(l.failed), ms(l.p50), ms(l.p99), ms(l.max)}
}

// latencyHeader is the header of the cells.
var latencyHeader = []string{"round trips", "failed", "p50", "p99", "max"}

// directFactor is how many times the p99 of PINGs straight to Redis, in
// the same run, the p99 of PINGs through the proxy may reach whatever
// bound was given: on a shared, busy machine both slow down together.
const directFactor = 3

// pingBound is the p99 that PINGs through the proxy may reach: the bound
// given (--ping-p99), or directFactor times the direct p99 if larger.
// 0 means no bound was given.
func pingBound(given, direct time.Duration) time.Duration {
	if given <= 0 {
		return 0
	}
	return max(given, directFactor*direct)
}

// judgePing compares the p99 of other clients' PINGs through the proxy
// with pingBound and returns a line to print and, when over it, the
// target missed (empty when not).
func judgePing(part string, given time.Duration, proxy, direct latencies) (line, missed string) {
	bound := pingBound(given, direct.p99)
	if bound == 0 {
		return fmt.Sprintf("PING p99 through the proxy %s, straight to Redis %s: not judged (no --ping-p99)", ms(proxy.p99), ms(direct.p99)), ""
	}
	why := fmt.Sprintf("max of --ping-p99 %s and %d x the direct p99 %s", ms(given), directFactor, ms(direct.p99))
	if proxy.p99 <= bound {
		return fmt.Sprintf("PING p99 through the proxy %s: within the bound %s (%s)", ms(proxy.p99), ms(bound), why), ""
	}
	missed = fmt.Sprintf("%s: other clients' PING p99 through the proxy %s over the bound %s (%s)", part, ms(proxy.p99), ms(bound), why)
	return fmt.Sprintf("PING p99 through the proxy %s: OVER the bound %s (%s)", ms(proxy.p99), ms(bound), why), missed
}

// judgeInnocent returns the target missed when innocent clients' round
// trips failed (always a failure), or "".
func judgeInnocent(part string, failed int, first string) string {
	if failed == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %d failed round trips of innocent clients through the proxy (first: %s)", part, failed, first)
}
