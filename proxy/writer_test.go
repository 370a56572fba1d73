package proxy

import (
	"bytes"
	"io"
	"net"
	"testing"
)

// TestWriter_PushesInTheirPlace: the writer goroutine writes a held push
// only once the replies that came before it on the wire are written, in
// the order they came; a push that does not parse goes as it came; a push
// without a message notes that the private connection was lost.
func TestWriter_PushesInTheirPlace(t *testing.T) {
	s := newTestServer(t)
	c := &client{s: s}
	c.out.rw.s = s
	w := writer{c: c}
	first := ">2\r\n$7\r\nmessage\r\n$1\r\na\r\n"
	second := ">2\r\n$7\r\nmessage\r\n$1\r\nb\r\n"
	w.take(pushMsg{msg: []byte(first), seq: 1})
	w.take(pushMsg{msg: []byte("not RESP"), seq: 2})
	w.take(pushMsg{msg: []byte(second), seq: 3})
	if w.lost {
		t.Fatal("lost before a push without a message")
	}
	w.writePushesUpTo(0)
	if len(c.out.buf) != 0 || len(w.held) != 3 {
		t.Fatalf("after 0 calls: wrote %q, holds %d", c.out.buf, len(w.held))
	}
	c.pinned.done.Store(2)
	w.writePushes()
	if got, want := string(c.out.buf), first+"not RESP"; got != want || len(w.held) != 1 {
		t.Fatalf("after 2 calls: wrote %q, want %q; holds %d", got, want, len(w.held))
	}
	w.take(pushMsg{})
	if !w.lost || len(w.held) != 1 {
		t.Fatalf("a push without a message: lost %v, holds %d", w.lost, len(w.held))
	}
	w.writePushesUpTo(3)
	if got, want := string(c.out.buf), first+"not RESP"+second; got != want || len(w.held) != 0 {
		t.Fatalf("after 3 calls: wrote %q, want %q; holds %d", got, want, len(w.held))
	}
}

// TestWriter_WriteOut: writeOut writes the output, counts large output as
// held while the socket takes it and gives it back after, and empties the
// buffer; broken output is dropped, not written.
func TestWriter_WriteOut(t *testing.T) {
	s := newTestServer(t)
	mine, theirs := net.Pipe()
	defer mine.Close()
	defer theirs.Close()
	c := &client{s: s, nc: mine}
	out := bytes.Repeat([]byte("x"), minOtherHeld+1)
	c.out.buf = append(c.out.buf, out...)
	type seen struct {
		writing, held int64
		got           []byte
		err           error
	}
	done := make(chan seen)
	go func() {
		// net.Pipe's Write returns once everything is read: after the
		// first byte, the counts are those of the write in progress.
		var r seen
		r.got = make([]byte, len(out))
		if _, r.err = io.ReadFull(theirs, r.got[:1]); r.err == nil {
			r.writing, r.held = c.mem.writing.Load(), c.mem.held.Load()
			_, r.err = io.ReadFull(theirs, r.got[1:])
		}
		done <- r
	}()
	c.writeOut()
	r := <-done
	if r.err != nil || !bytes.Equal(r.got, out) {
		t.Fatalf("read %d bytes, %v", len(r.got), r.err)
	}
	if n := int64(len(out)); r.writing != n || r.held != n {
		t.Fatalf("while writing: writing %d, held %d, want %d", r.writing, r.held, n)
	}
	if c.mem.writing.Load() != 0 || c.mem.held.Load() != 0 || s.heldTotal.Load() != 0 || len(c.out.buf) != 0 {
		t.Fatalf("after: writing %d, held %d, total %d, output %d bytes",
			c.mem.writing.Load(), c.mem.held.Load(), s.heldTotal.Load(), len(c.out.buf))
	}
	c.out.buf = append(c.out.buf, "+OK\r\n"...)
	c.out.broken = true
	c.writeOut() // would wait for a reader if it wrote
	if len(c.out.buf) != 0 {
		t.Fatalf("broken: %q left", c.out.buf)
	}
}
