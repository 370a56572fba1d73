// Command docload measures SET or GET throughput of one large generated JSON
// document against a Redis server or a proxy in front of it, as
// redis-benchmark does for its random values: --clients connections each send
// one command and wait for its reply, until --requests commands are done.
//
// redis-benchmark cannot send such a document (a command-line argument is at
// most 128 kB, and -d values are not JSON, so a compressing proxy would not
// compress them the way it compresses real documents); scripts/bench-large.sh
// uses this program for its compression-on rows.
//
// It prints the rate in requests per second on one line (or a JSON object
// with --json). Before a GET run it writes the document once, untimed, through
// the same address; every GET reply must have the document's length, and each
// client's first reply must equal it byte for byte.
//
//	go run ./scripts/docload --addr 127.0.0.1:6380 --op get --size 4.2MB --clients 2 --requests 200
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/squeeze-kv/squeeze/bench"
	"github.com/squeeze-kv/squeeze/internal/units"
)

// options are docload's flags.
type options struct {
	addr     string
	op       string
	size     int
	clients  int
	requests int
	key      string
	seed     uint64
	jsonOut  bool
}

// result is one run's measurement.
type result struct {
	Op       string  `json:"op"`
	Size     int     `json:"size_bytes"`
	Clients  int     `json:"clients"`
	Requests int     `json:"requests"`
	Seconds  float64 `json:"seconds"`
	Rate     float64 `json:"rps"`
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "docload:", err)
		os.Exit(2)
	}
	r, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docload:", err)
		os.Exit(1)
	}
	if o.jsonOut {
		_ = json.NewEncoder(os.Stdout).Encode(r)
		return
	}
	fmt.Printf("%.2f\n", r.Rate)
}

// parseFlags reads and checks the command line.
func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("docload", flag.ContinueOnError)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:6379", "host:port of Redis or of a proxy in front of it")
	fs.StringVar(&o.op, "op", "get", "set or get")
	size := fs.String("size", "4.2MB", "document size (e.g. 100kB, 4.2MB)")
	fs.IntVar(&o.clients, "clients", 2, "parallel connections")
	fs.IntVar(&o.requests, "requests", 100, "commands in all, shared by the clients")
	fs.StringVar(&o.key, "key", "squeeze:bench:doc", "the key written and read")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the generated document")
	fs.BoolVar(&o.jsonOut, "json", false, "print a JSON object instead of the rate alone")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	n, err := units.ParseSize(*size)
	switch {
	case err != nil:
		return o, fmt.Errorf("--size: %v", err)
	case n < 64 || n > 512<<20:
		return o, fmt.Errorf("--size: %d bytes is outside 64 B to 512 MiB", n)
	case o.op != "set" && o.op != "get":
		return o, fmt.Errorf("--op: %q is neither set nor get", o.op)
	case o.clients < 1 || o.requests < o.clients:
		return o, fmt.Errorf("need --clients >= 1 and --requests >= --clients (got %d and %d)", o.clients, o.requests)
	}
	o.size = int(n)
	return o, nil
}

// run writes the document if the run reads it, then times the load.
func run(o options) (result, error) {
	doc := bench.JSONDocument(o.seed, o.size)
	set := command("SET", o.key, string(doc))
	if o.op == "get" {
		c, err := dial(o.addr)
		if err != nil {
			return result{}, err
		}
		err = c.roundTrip(set, nil, nil)
		c.conn.Close()
		if err != nil {
			return result{}, fmt.Errorf("writing the document: %w", err)
		}
	}
	req, want := set, []byte(nil)
	if o.op == "get" {
		req, want = command("GET", o.key), doc
	}
	conns := make([]*client, o.clients)
	for i := range conns {
		c, err := dial(o.addr)
		if err != nil {
			return result{}, err
		}
		defer c.conn.Close()
		conns[i] = c
	}
	var left atomic.Int64
	left.Store(int64(o.requests))
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte // nil for SET: the reply is +OK
			if want != nil {
				buf = make([]byte, len(want)+2)
			}
			check := want
			for left.Add(-1) >= 0 {
				if errs[i] = c.roundTrip(req, buf, check); errs[i] != nil {
					left.Store(0)
					return
				}
				check = nil // the first reply is compared whole, later ones by length
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	if err := errors.Join(errs...); err != nil {
		return result{}, err
	}
	return result{Op: o.op, Size: o.size, Clients: o.clients, Requests: o.requests, Seconds: elapsed, Rate: float64(o.requests) / elapsed}, nil
}

// command encodes a RESP array of bulk strings.
func command(args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, "$"+strconv.Itoa(len(a))+"\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	return b
}

// client is one connection with its read buffer.
type client struct {
	conn net.Conn
	r    *bufio.Reader
}

func dial(addr string) (*client, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &client{conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}, nil
}

// roundTrip sends req and reads one reply: +OK when buf is nil, else a bulk
// string of len(buf)-2 bytes read into buf (and equal to check when given).
func (c *client) roundTrip(req, buf, check []byte) error {
	if _, err := c.conn.Write(req); err != nil {
		return err
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return err
	}
	line = bytes.TrimRight(line, "\r\n")
	if len(line) == 0 {
		return errors.New("empty reply line")
	}
	switch {
	case line[0] == '-':
		return fmt.Errorf("server replied %s", line[1:])
	case buf == nil:
		if string(line) != "+OK" {
			return fmt.Errorf("SET replied %q, not +OK", line)
		}
		return nil
	case line[0] != '$':
		return fmt.Errorf("GET replied %q, not a bulk string", line)
	}
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil || n != len(buf)-2 {
		return fmt.Errorf("GET replied a bulk of %s bytes, want %d", line[1:], len(buf)-2)
	}
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return err
	}
	if check != nil && !bytes.Equal(buf[:n], check) {
		return errors.New("GET replied other bytes than the document written")
	}
	return nil
}
