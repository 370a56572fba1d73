//go:build linux

// Command idleclients measures what idle connections cost a server: it
// reads the resident memory (VmRSS) of the process --pid, opens --clients
// connections to --addr, sends one GET on each and reads its reply, waits
// --settle, and reads VmRSS again. It prints the difference per client, so
// that a proxy and the Redis behind it can be compared on the same count
// (scripts/idle-memory.sh runs both). With --value SIZE each client first
// SETs a JSON text of SIZE bytes under a key of its own and GETs it back
// (checking it), as an application that stores documents and then waits
// would.
//
//	go run ./scripts/idleclients --addr 127.0.0.1:6380 --pid $(pgrep -f 'squeeze proxy') --clients 5000
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6380", "the server to connect to")
	pid := flag.Int("pid", 0, "the process whose resident memory to read (required)")
	clients := flag.Int("clients", 5000, "connections to open")
	settle := flag.Duration("settle", 2*time.Second, "wait after the last reply before reading the memory again")
	value := flag.Int("value", 0, "SET and GET a JSON text of this many bytes on each connection first (0: only a GET of a missing key)")
	jsonOut := flag.Bool("json", false, "print a JSON object")
	flag.Parse()
	if *pid <= 0 {
		fmt.Fprintln(os.Stderr, "idleclients: --pid is required")
		os.Exit(2)
	}
	if err := run(*addr, *pid, *clients, *value, *settle, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "idleclients:", err)
		os.Exit(1)
	}
}

func run(addr string, pid, n, size int, settle time.Duration, jsonOut bool) error {
	// Each connection is a descriptor here too.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(n)+100 {
		lim.Cur = min(lim.Max, uint64(n)+100)
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	before, err := rss(pid)
	if err != nil {
		return err
	}
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	const key = "idleclients:no-such-key"
	req := []byte(fmt.Sprintf("*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(key), key))
	buf := make([]byte, 64)
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return fmt.Errorf("connection %d: %w", i+1, err)
		}
		conns = append(conns, c)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(req); err != nil {
			return fmt.Errorf("connection %d: %w", i+1, err)
		}
		m, err := c.Read(buf)
		if err != nil {
			return fmt.Errorf("connection %d: %w", i+1, err)
		}
		if got := string(buf[:m]); got != "$-1\r\n" && got != "_\r\n" {
			return fmt.Errorf("connection %d: GET of a missing key answered %q", i+1, got)
		}
		if size > 0 {
			if err := setGet(c, i, size); err != nil {
				return fmt.Errorf("connection %d: %w", i+1, err)
			}
		}
	}
	time.Sleep(settle)
	after, err := rss(pid)
	if err != nil {
		return err
	}
	per := float64(after-before) / float64(n)
	if jsonOut {
		return json.NewEncoder(os.Stdout).Encode(map[string]any{
			"clients": n, "rss_before_kb": before, "rss_after_kb": after, "kb_per_client": per, "value_bytes": size,
		})
	}
	what := "idle clients"
	if size > 0 {
		what = fmt.Sprintf("idle clients after a SET and GET of %d bytes", size)
	}
	fmt.Printf("%d %s: VmRSS %d kB -> %d kB, %.1f kB each\n", n, what, before, after, per)
	return nil
}

// rss returns the VmRSS of process pid in kB.
func rss(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// setGet SETs a JSON text of size bytes under a key of connection i's and
// reads it back.
func setGet(c net.Conn, i, size int) error {
	var doc strings.Builder
	doc.WriteString(`[`)
	for j := 0; doc.Len() < size-64; j++ {
		fmt.Fprintf(&doc, `{"id":%d,"client":%d,"name":"item %d","tags":["a","b"]},`, j, i, j)
	}
	value := doc.String()
	value = value[:len(value)-1] + `]`
	key := fmt.Sprintf("idleclients:doc:%d", i)
	br := bufio.NewReader(c)
	req := fmt.Sprintf("*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(key), key, len(value), value)
	req += fmt.Sprintf("*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(key), key)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write([]byte(req)); err != nil {
		return err
	}
	want := fmt.Sprintf("+OK\r\n$%d\r\n%s\r\n", len(value), value)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(br, got); err != nil {
		return err
	}
	if string(got) != want {
		return fmt.Errorf("SET and GET of %d bytes answered %.40q...", len(value), got)
	}
	return nil
}
