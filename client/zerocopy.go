package client

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"unsafe"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
)

// GetToBuffer (a *redis.ZeroCopyStringCmd) reads a value into the caller's
// buffer. The hook gives it the value as plain go-redis would: the decoded
// bytes, or go-redis's own "buffer too small" error when they do not fit,
// and never writes past len(buf).
//
// Sent alone, the command reads into the caller's buffer as it would
// without the hook (a raw value costs no copy); a frame read there is
// copied aside and decoded into the buffer. A frame larger than the buffer
// (an incompressible value whose frame was kept, or a value that begins
// with the frame magic) makes go-redis fail with "buffer too small": the
// hook then reads the value again as a string and decodes it into the
// buffer. In a pipeline or transaction there is no second read: the
// command is sent as a plain GET and the reply decoded into the buffer.

// zeroCopyBuf returns the caller's buffer of c, which go-redis keeps in an
// unexported field (its Bytes method gives buf[:n], not len(buf)).
func zeroCopyBuf(c *redis.ZeroCopyStringCmd) ([]byte, bool) {
	f := reflect.ValueOf(c).Elem().FieldByName("buf")
	if !f.IsValid() || f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.Uint8 {
		return nil, false
	}
	return f.Bytes(), true
}

// errBufferTooSmall is go-redis's error for a value larger than the buffer
// (proto.Reader.ReadStringInto), word for word.
func errBufferTooSmall(need uint64, have int) error {
	return fmt.Errorf("redis: buffer too small: need %d bytes, have %d", need, have)
}

func isBufferTooSmall(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "redis: buffer too small")
}

// decodeInto writes the value stored as src into buf, as
// proto.Reader.ReadStringInto writes a value: its length, or an error
// when it does not fit, without writing past len(buf).
func (h *Hook) decodeInto(buf, src []byte) (int, error) {
	if !codec.IsFramed(src) {
		if len(src) > len(buf) {
			return 0, errBufferTooSmall(uint64(len(src)), len(buf))
		}
		return copy(buf, src), nil
	}
	hdr, err := codec.ParseHeader(src)
	if err != nil {
		return 0, err
	}
	if hdr.OriginalLen > uint64(len(buf)) {
		return 0, errBufferTooSmall(hdr.OriginalLen, len(buf))
	}
	out, err := h.appendDecode(buf[:0:len(buf)], src)
	if err != nil {
		return 0, err
	}
	if len(out) > 0 && unsafe.SliceData(out) != unsafe.SliceData(buf) {
		// The frame decoded to more than it declared (the decoder checks
		// that it does not): never hand over a copy elsewhere.
		return 0, fmt.Errorf("%w: frame decodes to more than the %d bytes it declares", codec.ErrCorrupt, hdr.OriginalLen)
	}
	return len(out), nil
}

// runZeroCopy sends a GetToBuffer alone (see above).
func (h *Hook) runZeroCopy(ctx context.Context, next redis.ProcessHook, c *redis.ZeroCopyStringCmd) error {
	buf, ok := zeroCopyBuf(c)
	if !ok {
		return &Error{Command: "get", Key: argString(c.Args()[1]), Err: fmt.Errorf("%w (this go-redis's ZeroCopyStringCmd keeps no buffer the hook can find)", ErrUnsupported)}
	}
	if err := next(ctx, c); err != nil && c.Err() == nil {
		c.SetErr(err)
	}
	err := c.Err()
	switch {
	case err == nil:
		n := c.Val()
		if !codec.IsFramed(buf[:n]) {
			return nil
		}
		bp := getFrameBuf()
		frame := append((*bp)[:0], buf[:n]...)
		*bp = frame
		n, err = h.decodeInto(buf, frame)
		putFrameBuf(bp)
		h.setZeroCopy(c, n, err)
	case isBufferTooSmall(err):
		sub := redis.NewStringCmd(ctx, c.Args()...)
		if err := next(ctx, sub); err != nil && sub.Err() == nil {
			sub.SetErr(err)
		}
		h.finishZeroCopy(c, sub)
	}
	return c.Err()
}

// finishZeroCopy sets the reply of a GetToBuffer sent as sub, a GET.
func (h *Hook) finishZeroCopy(c *redis.ZeroCopyStringCmd, sub *redis.StringCmd) {
	c.SetVal(0)
	if err := sub.Err(); err != nil {
		c.SetErr(err)
		return
	}
	buf, ok := zeroCopyBuf(c)
	if !ok {
		c.SetErr(&Error{Command: "get", Key: argString(c.Args()[1]), Err: fmt.Errorf("%w (this go-redis's ZeroCopyStringCmd keeps no buffer the hook can find)", ErrUnsupported)})
		return
	}
	s := sub.Val()
	n, err := h.decodeInto(buf, unsafe.Slice(unsafe.StringData(s), len(s)))
	h.setZeroCopy(c, n, err)
}

func (h *Hook) setZeroCopy(c *redis.ZeroCopyStringCmd, n int, err error) {
	if err != nil {
		c.SetVal(0)
		if !isBufferTooSmall(err) {
			err = &Error{Command: "get", Key: argString(c.Args()[1]), Err: err}
		}
		c.SetErr(err)
		return
	}
	c.SetVal(n)
	c.SetErr(nil)
}
