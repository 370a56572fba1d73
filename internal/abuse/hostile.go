package abuse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/squeeze-kv/squeeze/resp"
)

// hostileInput is one thing a hostile client sends on a fresh connection.
type hostileInput struct {
	name string
	data []byte
}

// hostileInputs are what the hostile part sends: the lines of an HTTP
// request (a browser or a cross-protocol attack), replication handshakes,
// bytes that are not RESP, and lengths no server should allocate for.
func hostileInputs(seed uint64) []hostileInput {
	garbage := randomBytes(seed, 64)
	garbage[0] = 0x16 // as a TLS handshake starts
	for i, b := range garbage {
		if b == '\r' || b == '\n' || b == '"' || b == '\'' {
			garbage[i] = 'x'
		}
	}
	cmd := func(args ...string) []byte {
		var bs [][]byte
		for _, a := range args {
			bs = append(bs, []byte(a))
		}
		return resp.AppendCommand(nil, bs...)
	}
	return []hostileInput{
		{"POST / HTTP/1.1", []byte("POST / HTTP/1.1\r\n")},
		{"Host: x", []byte("Host: x\r\n")},
		{"SYNC", cmd("SYNC")},
		{"PSYNC ? -1", cmd("PSYNC", "?", "-1")},
		{"64 random bytes, CRLF", append(garbage, "\r\n"...)},
		{"70 KiB line, no CRLF", bytes.Repeat([]byte("a"), 70<<10)},
		{"*4294967296 (multibulk length)", []byte("*4294967296\r\n")},
		{"*1, $4294967296 (bulk length)", []byte("*1\r\n$4294967296\r\n")},
	}
}

// hostileWatch is how long a hostile sender waits, after sending, for a
// reply and for the server to close the connection.
const hostileWatch = time.Second

// hostileOutcome is what a server did with one hostile input.
type hostileOutcome struct {
	reply  string // the first line it sent, quoted and cut short; "" for none
	closed bool   // it closed the connection within hostileWatch
}

func (o hostileOutcome) String() string {
	reply := o.reply
	if reply == "" {
		reply = "no reply"
	}
	return reply + map[bool]string{true: ", closed", false: ", open"}[o.closed]
}

// sendHostile sends data on a fresh connection to addr and watches for
// hostileWatch: the first reply line, and whether the server closed it.
func sendHostile(addr string, data []byte) (hostileOutcome, error) {
	nc, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return hostileOutcome{}, err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(hostileWatch))
	_, werr := nc.Write(data)
	var got []byte
	buf := make([]byte, 16<<10)
	var rerr error
	for {
		n, err := nc.Read(buf)
		if len(got) < 4096 {
			got = append(got, buf[:min(n, 4096-len(got))]...)
		}
		if err != nil {
			rerr = err
			break
		}
	}
	o := hostileOutcome{closed: !isTimeout(rerr) || (werr != nil && !isTimeout(werr))}
	if len(got) > 0 {
		line, _, _ := bytes.Cut(got, []byte("\n"))
		o.reply = clip(strings.TrimSuffix(string(line), "\r"), 40)
	}
	return o, nil
}

// clip quotes s for a table cell, in ASCII, cut to about n characters
// of the quoted form ("..." marks a cut).
func clip(s string, n int) string {
	q := strconv.QuoteToASCII(s)
	if len(q) <= n {
		return q
	}
	return q[:n-4] + `..."`
}

// hostileEvery paces each hostile sender: one connection at a time, at
// most one started per hostileEvery, so that the inputs Redis closes at
// once do not turn into a connection storm of their own.
const hostileEvery = 20 * time.Millisecond

// hostileTally is what the proxy did with one input over many sends.
type hostileTally struct {
	first         hostileOutcome
	sends, closed int
	err           error // a connection the proxy did not accept
}

// runHostile is the hostile part: senders send hostile input through the
// proxy from fresh connections while innocent clients SET and GET their
// own values through it and others PING through it and straight to Redis.
// Each input is sent straight to Redis too, in the same run, to compare
// whether the proxy closes the sender as Redis does.
func runHostile(ctx context.Context, w io.Writer, e *environment) ([]string, error) {
	redis, proxy, stop, err := e.startPair(ctx, "hostile")
	if err != nil {
		return nil, err
	}
	defer stop()
	inputs := hostileInputs(e.cfg.Seed)

	// Straight to Redis, all at once (each waits up to hostileWatch).
	direct := make([]hostileOutcome, len(inputs))
	directErrs := make([]error, len(inputs))
	var wg sync.WaitGroup
	for i, in := range inputs {
		wg.Add(1)
		go func() { defer wg.Done(); direct[i], directErrs[i] = sendHostile(redis.addr, in.data) }()
	}
	wg.Wait()
	if err := errors.Join(directErrs...); err != nil {
		return nil, fmt.Errorf("straight to Redis: %w", err)
	}

	ping := startProber(proxy.addr, "PING through the proxy", pingOp)
	pingD := startProber(redis.addr, "PING straight to Redis", pingOp)
	innocents := startInnocents(proxy.addr, e.cfg.Seed)
	all := append(probers{ping, pingD}, innocents...)
	defer all.stop()
	// Through the proxy: one sender per input, each sending again and
	// again from a fresh connection for the part's time.
	hold := e.cfg.phase(3 * time.Second)
	tallies := make([]hostileTally, len(inputs))
	start := time.Now()
	for i, in := range inputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := &tallies[i]
			for t.sends == 0 || time.Since(start) < hold {
				if ctx.Err() != nil {
					return
				}
				next := time.Now().Add(hostileEvery)
				o, err := sendHostile(proxy.addr, in.data)
				if err != nil {
					t.err = err
					return
				}
				if t.sends == 0 {
					t.first = o
				}
				t.sends++
				if o.closed {
					t.closed++
				}
				time.Sleep(time.Until(next)) // pacing, not waiting for a state
			}
		}()
	}
	wg.Wait()
	end := time.Now()
	all.stop()
	if err := proxy.alive(); err != nil {
		return nil, err
	}

	fmt.Fprintf(w, "each input sent on fresh connections through the proxy for %s (and once straight to Redis), watched %s for a reply and a close;\n", hold, hostileWatch)
	fmt.Fprintf(w, "meanwhile %d innocent clients SET and GET their own values through the proxy, and PINGs go through it and straight to Redis every %s.\n", innocentWriters, probeEvery)
	t := newTable("hostile input", "straight to Redis", "through the proxy (first)", "proxy closed it", "as Redis")
	differ := 0
	for i, in := range inputs {
		tl := tallies[i]
		if tl.err != nil {
			t.add(in.name, direct[i].String(), "connect: "+tl.err.Error(), "-", "NO")
			differ++
			continue
		}
		same := "yes"
		if want := map[bool]int{true: tl.sends, false: 0}[direct[i].closed]; tl.closed != want {
			same = "NO"
			differ++
		}
		t.add(in.name, direct[i].String(), tl.first.String(), fmt.Sprintf("%d of %d", tl.closed, tl.sends), same)
	}
	t.writeTo(w)
	fmt.Fprintf(w, "senders closed otherwise than Redis closes them: %d of %d inputs (printed, not judged)\n", differ, len(inputs))
	lt := newTable(append([]string{fmt.Sprintf("meanwhile (%s)", end.Sub(start).Round(time.Millisecond))}, latencyHeader...)...)
	pl, dl := ping.during(), pingD.during()
	lt.add(append([]string{"PING through the proxy"}, pl.cells()...)...)
	lt.add(append([]string{"PING straight to Redis"}, dl.cells()...)...)
	lt.add(append([]string{"innocent SET+GET, proxy"}, innocents.all().cells()...)...)
	lt.writeTo(w)
	line, m := judgePing("hostile", e.cfg.PingP99, pl, dl)
	fmt.Fprintln(w, line)
	missed := appendMissed(nil, m)
	failed, first := append(probers{ping}, innocents...).failures()
	fmt.Fprintf(w, "failed round trips of innocent clients through the proxy (PING, SET+GET): %d (target 0)\n", failed)
	return appendMissed(missed, judgeInnocent("hostile", failed, first)), nil
}
