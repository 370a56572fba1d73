package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
)

// DefaultDocSizes are the JSON document sizes of the docs study: seed 001
// went from 100 kB to 20 MB.
var DefaultDocSizes = []int{100e3, 250e3, 500e3, 1e6, 2e6, 4e6, 10e6, 20e6}

// DefaultDocCodecs are the codecs of the docs study: seed 001's three
// (brotli-1, gzip-3, deflate-3) and squeeze's fast ones.
const DefaultDocCodecs = "none,brotli:1,gzip:3,deflate:3,zstd:1,zstd:3,lz4,s2,minlz"

// DocsOptions configure RunDocs. Zero fields take the documented defaults.
type DocsOptions struct {
	// Client is the Redis to measure against. Required.
	Client *redis.Client
	// Link names the network between client and server in the rows
	// ("loopback" by default).
	Link string
	// Codecs to measure; "none" is added first when missing, as the
	// baseline. Default DefaultDocCodecs.
	Codecs []codec.Algorithm
	// Sizes of the documents; default DefaultDocSizes.
	Sizes []int
	// Repeats of each upload and download, of which the median is reported;
	// default 5.
	Repeats int
	// CellBudget caps the time of one cell's repeats (at least one always
	// runs); default 3s.
	CellBudget time.Duration
	// Value returns the document of a given size; default JSONDocument.
	Value func(size int) []byte
	// Proxy measures through squeeze proxies instead: one in-process proxy
	// per codec on loopback in front of Client, and a plain go-redis client
	// sending SET and GET to it, as an application in any language would
	// (see DocRow.Path). Client must reach Redis over TCP.
	Proxy bool
	// Progress is called after each cell.
	Progress Progress
}

// RunDocs runs seed 001's study on one link: for each document size and
// codec, the upload time (compress + SET) and the download time (GET +
// decompress), medians of repeats. Every download is checked against the
// document. The key it writes starts with KeyPrefix and is deleted at the
// end.
func RunDocs(ctx context.Context, o DocsOptions) ([]DocRow, error) {
	if o.Client == nil {
		return nil, errors.New("bench: DocsOptions.Client is nil")
	}
	if o.Link == "" {
		o.Link = "loopback"
	}
	if len(o.Codecs) == 0 {
		var err error
		if o.Codecs, err = ParseAlgorithms(DefaultDocCodecs); err != nil {
			return nil, err
		}
	}
	o.Codecs = append([]codec.Algorithm{{ID: codec.IDNone}}, withoutNone(o.Codecs)...)
	if len(o.Sizes) == 0 {
		o.Sizes = DefaultDocSizes
	}
	if o.Repeats <= 0 {
		o.Repeats = 5
	}
	if o.CellBudget <= 0 {
		o.CellBudget = 3 * time.Second
	}
	if o.Value == nil {
		o.Value = func(size int) []byte { return JSONDocument(DefaultSeed+uint64(size), size) }
	}
	dec, err := codec.NewDecoder()
	if err != nil {
		return nil, err
	}
	encs := make([]*codec.Encoder, len(o.Codecs))
	for i, a := range o.Codecs {
		if encs[i], err = codec.NewEncoder(a); err != nil {
			return nil, fmt.Errorf("%s: %w", a, err)
		}
	}
	key := KeyPrefix + "doc"
	defer o.Client.Del(context.WithoutCancel(ctx), key)
	// Each codec's client: o.Client itself, or a proxy writing that codec.
	clients := make([]*redis.Client, len(o.Codecs))
	path := "library"
	for i, a := range o.Codecs {
		clients[i] = o.Client
		if !o.Proxy {
			continue
		}
		path = "proxy"
		c, stop, err := proxyFor(ctx, o.Client, a)
		if err != nil {
			return nil, err
		}
		defer stop()
		clients[i], encs[i] = c, nil
	}
	link := o.Link
	if o.Proxy {
		link += " via proxy"
	}
	var rows []DocRow
	total, done := len(o.Sizes)*len(o.Codecs), 0
	for _, size := range o.Sizes {
		doc := o.Value(size)
		for i, a := range o.Codecs {
			row, err := docCell(ctx, o, clients[i], encs[i], dec, key, doc)
			if err != nil {
				return rows, fmt.Errorf("%s, %s document on %s (%s): %w", a, FormatSize(int64(size)), o.Link, path, err)
			}
			row.Codec, row.Link, row.Path = a.String(), link, path
			rows = append(rows, row)
			done++
			o.Progress.step(done, total)
		}
	}
	fillDocRelative(rows)
	return rows, nil
}

// docCell measures one codec and size. With a nil enc, c is a proxy that
// compresses and decompresses: the document goes as it is, and the stored
// size is read from Redis directly.
func docCell(ctx context.Context, o DocsOptions, c *redis.Client, enc *codec.Encoder, dec *codec.Decoder, key string, doc []byte) (DocRow, error) {
	var up, down, comp, decomp []float64
	var wbuf, rbuf []byte
	start := time.Now()
	for r := 0; r < o.Repeats && (r == 0 || time.Since(start) < o.CellBudget); r++ {
		if err := ctx.Err(); err != nil {
			return DocRow{}, err
		}
		t0 := time.Now()
		if enc != nil {
			wbuf = enc.AppendEncode(wbuf[:0], doc)
		} else {
			wbuf = doc
		}
		t1 := time.Now()
		if err := c.Set(ctx, key, wbuf, 0).Err(); err != nil {
			return DocRow{}, fmt.Errorf("SET: %w", err)
		}
		t2 := time.Now()
		b, err := c.Get(ctx, key).Bytes()
		if err != nil {
			return DocRow{}, fmt.Errorf("GET: %w", err)
		}
		t3 := time.Now()
		if enc != nil {
			if rbuf, err = dec.AppendDecode(rbuf[:0], b); err != nil {
				return DocRow{}, fmt.Errorf("decode: %w", err)
			}
		} else {
			rbuf = b
		}
		t4 := time.Now()
		if !bytes.Equal(rbuf, doc) {
			return DocRow{}, fmt.Errorf("downloaded document differs from the uploaded one (%d bytes, want %d)", len(rbuf), len(doc))
		}
		up = append(up, t2.Sub(t0).Seconds()*1e3)
		down = append(down, t4.Sub(t2).Seconds()*1e3)
		comp = append(comp, t1.Sub(t0).Seconds()*1e3)
		decomp = append(decomp, t4.Sub(t3).Seconds()*1e3)
	}
	row := DocRow{
		SizeBytes: len(doc), StoredBytes: len(wbuf), Repeats: len(up),
		UploadMs: Median(up), DownloadMs: Median(down), CompressMs: Median(comp), DecompressMs: Median(decomp),
	}
	if enc == nil { // the proxy compressed: no codec time of our own to report
		n, err := o.Client.StrLen(ctx, key).Result()
		if err != nil {
			return DocRow{}, fmt.Errorf("STRLEN in Redis: %w", err)
		}
		row.StoredBytes, row.CompressMs, row.DecompressMs = int(n), 0, 0
	}
	return row, nil
}

func fillDocRelative(rows []DocRow) {
	type cell struct {
		link string
		size int
	}
	base := map[cell]DocRow{}
	for _, r := range rows {
		if r.Codec == "none" {
			base[cell{r.Link, r.SizeBytes}] = r
		}
	}
	for i := range rows {
		r := &rows[i]
		b, ok := base[cell{r.Link, r.SizeBytes}]
		if !ok {
			continue
		}
		r.UploadPct = ChangePct(r.UploadMs, b.UploadMs)
		r.DownloadPct = ChangePct(r.DownloadMs, b.DownloadMs)
		r.SavedPct = SavedPct(float64(r.StoredBytes), float64(b.StoredBytes))
	}
}

// Crossovers returns, per codec, link and direction, the smallest measured
// document size from which the codec is faster than no compression at that
// size and every larger one (SizeBytes -1: never within the sizes
// measured).
func Crossovers(rows []DocRow) []Crossover {
	type series struct{ codec, link string }
	var order []series
	bySeries := map[series][]DocRow{}
	base := map[string]map[int]DocRow{}
	for _, r := range rows {
		if r.Codec == "none" {
			if base[r.Link] == nil {
				base[r.Link] = map[int]DocRow{}
			}
			base[r.Link][r.SizeBytes] = r
			continue
		}
		s := series{r.Codec, r.Link}
		if _, ok := bySeries[s]; !ok {
			order = append(order, s)
		}
		bySeries[s] = append(bySeries[s], r)
	}
	var out []Crossover
	for _, s := range order {
		for _, dir := range []string{"upload", "download"} {
			cross := -1
			rs := bySeries[s]
			// Walk from the largest size down while the codec wins.
			sorted := append([]DocRow(nil), rs...)
			for i := 1; i < len(sorted); i++ {
				for j := i; j > 0 && sorted[j].SizeBytes < sorted[j-1].SizeBytes; j-- {
					sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
				}
			}
			for i := len(sorted) - 1; i >= 0; i-- {
				r := sorted[i]
				b, ok := base[s.link][r.SizeBytes]
				if !ok {
					break
				}
				v, bv := r.UploadMs, b.UploadMs
				if dir == "download" {
					v, bv = r.DownloadMs, b.DownloadMs
				}
				if v >= bv {
					break
				}
				cross = r.SizeBytes
			}
			out = append(out, Crossover{Codec: s.codec, Link: s.link, Direction: dir, SizeBytes: cross})
		}
	}
	return out
}
