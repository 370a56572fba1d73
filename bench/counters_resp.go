package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/counters"
)

// countersIncrRESP is countersIncr with the lean driver: each client owns a
// raw connection, writes depth pre-encoded commands in one write and reads
// the replies, checking every one (errors, and BITFIELD's nil for a failed
// overflow). Scripts are loaded through rdb first.
func countersIncrRESP(ctx context.Context, opt *redis.Options, rdb *redis.Client, cfg CountersConfig, layout string, depth int) (int64, float64, error) {
	if opt.TLSConfig != nil {
		return 0, 0, errors.New("the resp driver speaks plain TCP or unix sockets only; use the go-redis driver for TLS")
	}
	var sha string
	switch layout {
	case CountersLayoutList:
		sha = redis.NewScript(CountersListScript).Hash()
		if err := redis.NewScript(CountersListScript).Load(ctx, rdb).Err(); err != nil {
			return 0, 0, err
		}
	case CountersLayoutHex:
		sha = redis.NewScript(CountersHexScript).Hash()
		if err := redis.NewScript(CountersHexScript).Load(ctx, rdb).Err(); err != nil {
			return 0, 0, err
		}
	}
	store, err := counters.New(rdb, counters.Config{Prefix: "e:", Type: counters.U16, Slots: cfg.Days})
	if err != nil {
		return 0, 0, err
	}
	typ, ov := store.Config().Type.String(), store.Config().Overflow.String()
	build := func(dst []byte, e, d int) []byte {
		key := entityKey(e)
		switch layout {
		case CountersLayoutList:
			return appendCommand(dst, "EVALSHA", sha, "1", key, strconv.Itoa(d), "1")
		case CountersLayoutHex:
			return appendCommand(dst, "EVALSHA", sha, "1", key, strconv.Itoa(d+1), "1")
		case CountersLayoutKeys:
			return appendCommand(dst, "INCRBY", key+":"+strconv.Itoa(d), "1")
		default: // the command store.IncrArgs builds
			return appendCommand(dst, "BITFIELD", key, "OVERFLOW", ov, "INCRBY", typ, "#"+strconv.Itoa(d), "1")
		}
	}

	conns := make([]net.Conn, cfg.Clients)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range conns {
		c, err := net.DialTimeout(opt.Network, opt.Addr, 5*time.Second)
		if err != nil {
			return 0, 0, err
		}
		conns[i] = c
		br := bufio.NewReader(c)
		var hello []byte
		if opt.Password != "" {
			if opt.Username != "" {
				hello = appendCommand(hello, "AUTH", opt.Username, opt.Password)
			} else {
				hello = appendCommand(hello, "AUTH", opt.Password)
			}
		}
		if opt.DB != 0 {
			hello = appendCommand(hello, "SELECT", strconv.Itoa(opt.DB))
		}
		if len(hello) > 0 {
			if _, err := c.Write(hello); err != nil {
				return 0, 0, err
			}
			for n := strings.Count(string(hello), "*"); n > 0; n-- {
				if _, err := readReply(br, 0); err != nil {
					return 0, 0, fmt.Errorf("connection setup: %w", err)
				}
			}
		}
	}

	deadline := time.Now().Add(cfg.Duration)
	return runIncrLoad(ctx, cfg, layout, depth, len(conns), func(ci int) func(k int) error {
		c := conns[ci]
		c.SetDeadline(deadline.Add(30 * time.Second))
		br := bufio.NewReaderSize(c, 16<<10)
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(ci)+uint64(depth)<<32))
		var buf []byte
		return func(k int) error {
			buf = buf[:0]
			for i := 0; i < k; i++ {
				buf = build(buf, rng.IntN(cfg.Entities), rng.IntN(cfg.Days))
			}
			if _, err := c.Write(buf); err != nil {
				return err
			}
			for i := 0; i < k; i++ {
				isNil, err := readReply(br, 0)
				if err == nil && isNil && layout == CountersLayoutPacked {
					err = counters.ErrOverflow
				}
				if err != nil {
					return err
				}
			}
			return nil
		}
	})
}

// appendCommand appends args as a RESP array of bulk strings.
func appendCommand(dst []byte, args ...string) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(len(args)), 10)
	dst = append(dst, '\r', '\n')
	for _, a := range args {
		dst = append(dst, '$')
		dst = strconv.AppendInt(dst, int64(len(a)), 10)
		dst = append(dst, '\r', '\n')
		dst = append(dst, a...)
		dst = append(dst, '\r', '\n')
	}
	return dst
}

// readReply reads one RESP2 reply, discarding its content. It reports
// whether the reply was, or contained, a nil, and returns an error for an
// error reply (or one nested in an array) or a malformed stream.
func readReply(br *bufio.Reader, depth int) (bool, error) {
	if depth > 8 {
		return false, errors.New("reply nested too deep")
	}
	line, err := br.ReadSlice('\n')
	if err != nil {
		return false, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return false, fmt.Errorf("malformed reply line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', ':':
		return false, nil
	case '-':
		return false, replyError(body)
	case '$':
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return false, fmt.Errorf("bad bulk length %q", body)
		}
		if n < 0 {
			return true, nil
		}
		_, err = br.Discard(n + 2)
		return false, err
	case '*':
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return false, fmt.Errorf("bad array length %q", body)
		}
		if n < 0 {
			return true, nil
		}
		anyNil := false
		var first error
		for i := 0; i < n; i++ {
			isNil, err := readReply(br, depth+1)
			var re replyError
			if err != nil && !errors.As(err, &re) {
				return false, err // the stream is out of sync
			}
			if err != nil && first == nil {
				first = err
			}
			anyNil = anyNil || isNil
		}
		return anyNil, first
	}
	return false, fmt.Errorf("unknown reply type %q", line[0])
}

// replyError is an error reply from the server; the stream stays in sync.
type replyError string

func (e replyError) Error() string { return "redis: " + string(e) }
