package codec

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/minio/minlz"
)

// A minlz payload is one or more chunks, each the uvarint length of a MinLZ
// block followed by the block (docs/FORMAT.md). A MinLZ block holds at most
// minlz.MaxBlockSize (8 MiB) of decoded bytes, so larger values take
// several chunks; an Encoder with concurrency also cuts values of
// ParallelMinSize or more into chunks compressed at once. Values up to
// 8 MiB written on one goroutine are one chunk.

// minlzSections returns how many chunks a value of n bytes is cut into when
// parts goroutines may compress it, and the decoded size of each but the
// last.
func minlzSections(n, parts int) (count, size int) {
	count = max(1, parts, (n+minlz.MaxBlockSize-1)/minlz.MaxBlockSize)
	size = (n + count - 1) / count
	if size == 0 {
		return 1, 0
	}
	return (n + size - 1) / size, size
}

type minlzCompressor struct{ level int }

func (z minlzCompressor) appendCompress(dst, src []byte) ([]byte, error) {
	return z.appendChunks(dst, src, 1)
}

func (z minlzCompressor) appendCompressParallel(dst, src []byte, parts int) ([]byte, error) {
	return z.appendChunks(dst, src, parts)
}

// appendChunks compresses src in chunks on up to parts goroutines.
func (z minlzCompressor) appendChunks(dst, src []byte, parts int) ([]byte, error) {
	count, size := minlzSections(len(src), parts)
	if count == 1 {
		return z.appendChunk(dst, src)
	}
	return z.appendChunksParallel(dst, src, count, size, parts)
}

// appendChunk appends one chunk: the block is compressed behind room for
// the longest length prefix its worst case needs, then moved down behind
// its actual prefix (by the byte or two the prefix turned out shorter).
func (z minlzCompressor) appendChunk(dst, src []byte) ([]byte, error) {
	bound := minlz.MaxEncodedLen(len(src))
	if bound < 0 {
		return dst, fmt.Errorf("codec: section of %d bytes too large for minlz", len(src))
	}
	room := uvarintLen(uint64(bound))
	dst = grow(dst, room+bound)
	base := len(dst)
	area := dst[base : base+room+bound]
	n, err := z.encodeAt(area[room:], src)
	if err != nil {
		return dst, err
	}
	w := binary.PutUvarint(area, uint64(n))
	w += copy(area[w:], area[room:room+n])
	return dst[:base+w], nil
}

// encodeAt compresses src as one MinLZ block at the start of area, which
// holds its worst case, and returns the block's length.
func (z minlzCompressor) encodeAt(area, src []byte) (int, error) {
	out, err := minlz.Encode(area, src, z.level)
	if err != nil {
		return 0, fmt.Errorf("codec: minlz: %w", err)
	}
	if len(out) > 0 && &out[0] != &area[0] {
		return 0, fmt.Errorf("codec: minlz wrote %d bytes outside its %d byte bound", len(out), len(area))
	}
	return len(out), nil
}

// appendChunksParallel compresses count sections of size bytes on up to
// parts goroutines, each into its own region of dst sized for its worst
// case, and then moves the blocks down behind their length prefixes: no
// scratch buffers, which a sync.Pool would lose at every GC.
func (z minlzCompressor) appendChunksParallel(dst, src []byte, count, size, parts int) ([]byte, error) {
	type region struct {
		in             []byte
		off, room, len int
		err            error
	}
	regions := make([]region, count)
	total := 0
	for i := range regions {
		in := src[i*size : min(len(src), (i+1)*size)]
		bound := minlz.MaxEncodedLen(len(in))
		if bound < 0 {
			return dst, fmt.Errorf("codec: section of %d bytes too large for minlz", len(in))
		}
		room := uvarintLen(uint64(bound))
		regions[i] = region{in: in, off: total, room: room}
		total += room + bound
	}
	dst = grow(dst, total)
	base := len(dst)
	area := dst[base : base+total]
	next := make(chan int, count)
	for i := range regions {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range min(parts, count) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r := &regions[i]
				end := r.off + r.room + minlz.MaxEncodedLen(len(r.in))
				r.len, r.err = z.encodeAt(area[r.off+r.room:end], r.in)
			}
		}()
	}
	wg.Wait()
	w := 0
	for i := range regions {
		r := &regions[i]
		if r.err != nil {
			return dst, r.err
		}
		body := area[r.off+r.room : r.off+r.room+r.len]
		w += binary.PutUvarint(area[w:], uint64(r.len))
		w += copy(area[w:], body) // w never passes the body's start: copy moves down
	}
	return dst[:base+w], nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// decodeMinLZ decodes the chunks of a minlz payload into the n bytes of
// spare capacity of dst.
func decodeMinLZ(dst, payload []byte, n int) ([]byte, error) {
	out := dst[len(dst) : len(dst)+n]
	pos := 0
	for chunk := 0; len(payload) > 0; chunk++ {
		blockLen, k := binary.Uvarint(payload)
		if k <= 0 {
			return dst, fmt.Errorf("%w: minlz chunk %d: bad block length", ErrCorrupt, chunk)
		}
		payload = payload[k:]
		if blockLen > uint64(len(payload)) {
			return dst, fmt.Errorf("%w: minlz chunk %d: block of %d bytes, %d left", ErrTruncated, chunk, blockLen, len(payload))
		}
		block := payload[:blockLen]
		payload = payload[blockLen:]
		ok, dl, err := minlz.IsMinLZ(block)
		if err != nil || !ok {
			if err == nil {
				err = fmt.Errorf("not a MinLZ block")
			}
			return dst, fmt.Errorf("%w: minlz chunk %d: %v", ErrCorrupt, chunk, err)
		}
		if dl > n-pos {
			return dst, fmt.Errorf("%w: minlz chunks hold more than %d bytes", ErrCorrupt, n)
		}
		got, err := minlz.Decode(out[pos:pos+dl], block)
		if err != nil {
			return dst, corrupt(IDMinLZ, err)
		}
		if len(got) != dl || (dl > 0 && &got[0] != &out[pos]) {
			return dst, fmt.Errorf("%w: minlz chunk %d decoded to %d bytes, its header says %d", ErrCorrupt, chunk, len(got), dl)
		}
		pos += dl
	}
	if pos != n {
		return dst, fmt.Errorf("%w: minlz payload ends after %d of %d bytes", ErrTruncated, pos, n)
	}
	return dst[:len(dst)+n], nil
}
