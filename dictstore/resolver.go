package dictstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
)

// DefaultLoadTimeout bounds one load of a dictionary from Redis when the
// caller's context has no earlier deadline.
const DefaultLoadTimeout = 5 * time.Second

// retryMissing is how long a failed load is remembered: frames naming a
// dictionary that is not published fail fast instead of sending a GET to
// Redis for every read.
const retryMissing = time.Second

// A Resolver hands out a *codec.Decoder that knows every dictionary loaded
// so far, and loads the dictionaries frames name from Redis on demand. It
// is safe for concurrent use. Readers do:
//
//	dec := r.Decoder()
//	out, err := dec.AppendDecode(dst, frame)
//	if errors.Is(err, codec.ErrUnknownDictionary) {
//		h, _ := codec.ParseHeader(frame)
//		if dec, err = r.Refresh(ctx, h.DictID); err == nil {
//			out, err = dec.AppendDecode(dst, frame)
//		}
//	}
//
// Decoder is one atomic load: no lock, no allocation.
type Resolver struct {
	rdb  redis.UniversalClient
	opts []codec.DecoderOption
	cur  atomic.Pointer[resolved]

	mu      sync.Mutex
	loading map[uint32]*loadCall
	failed  map[uint32]failure
}

// resolved is one immutable generation: a decoder and the dictionaries it
// was built with.
type resolved struct {
	dec   *codec.Decoder
	dicts map[uint32]codec.Dictionary
}

type loadCall struct {
	done chan struct{}
	err  error
}

type failure struct {
	err error
	at  time.Time
}

// NewResolver returns a Resolver reading dictionaries from rdb; opts (such
// as codec.WithMaxDecodedSize) apply to every Decoder it builds. It loads
// nothing yet: call Preload to load every published dictionary up front.
func NewResolver(rdb redis.UniversalClient, opts ...codec.DecoderOption) (*Resolver, error) {
	r := &Resolver{rdb: rdb, opts: opts, loading: map[uint32]*loadCall{}, failed: map[uint32]failure{}}
	dec, err := codec.NewDecoder(opts...)
	if err != nil {
		return nil, err
	}
	r.cur.Store(&resolved{dec: dec, dicts: map[uint32]codec.Dictionary{}})
	return r, nil
}

// Decoder returns the current Decoder, which knows every dictionary loaded
// so far.
func (r *Resolver) Decoder() *codec.Decoder { return r.cur.Load().dec }

// Known reports whether dictionary id is loaded.
func (r *Resolver) Known(id uint32) bool {
	_, ok := r.cur.Load().dicts[id]
	return ok
}

// Refresh makes sure dictionary id (as a frame header carries it) is
// loaded and returns a Decoder that knows it. The first caller loads it
// from Redis; concurrent callers for the same id wait for that load. A
// dictionary that is not published gives an error wrapping ErrNotFound that
// names the id and the key; the failure is remembered for a second, so
// that reads of such frames do not each query Redis.
func (r *Resolver) Refresh(ctx context.Context, id uint64) (*codec.Decoder, error) {
	if id == 0 || id > MaxID {
		return nil, fmt.Errorf("dictstore: frame names dictionary id %d, outside 1..2^31-1", id)
	}
	if _, err := r.Dictionary(ctx, uint32(id)); err != nil {
		return nil, err
	}
	return r.Decoder(), nil
}

// Dictionary returns dictionary id, loading it from Redis first if needed
// (as Refresh does). Writers use it to pick the dictionary they compress
// with.
func (r *Resolver) Dictionary(ctx context.Context, id uint32) (codec.Dictionary, error) {
	if d, ok := r.cur.Load().dicts[id]; ok {
		return d, nil
	}
	r.mu.Lock()
	if d, ok := r.cur.Load().dicts[id]; ok { // loaded while we waited for mu
		r.mu.Unlock()
		return d, nil
	}
	if f, ok := r.failed[id]; ok && time.Since(f.at) < retryMissing {
		r.mu.Unlock()
		return codec.Dictionary{}, f.err
	}
	lc, inFlight := r.loading[id]
	if !inFlight {
		lc = &loadCall{done: make(chan struct{})}
		r.loading[id] = lc
	}
	r.mu.Unlock()
	if inFlight {
		select {
		case <-lc.done:
		case <-ctx.Done():
			return codec.Dictionary{}, fmt.Errorf("dictstore: waiting for dictionary %d: %w", id, ctx.Err())
		}
		if lc.err != nil {
			return codec.Dictionary{}, lc.err
		}
		return r.cur.Load().dicts[id], nil
	}
	// The load runs on its own bounded context: other callers wait for it,
	// and must not fail because the first caller gave up.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultLoadTimeout)
	d, err := Load(lctx, r.rdb, id)
	cancel()
	r.mu.Lock()
	if err == nil {
		err = r.addLocked(d)
	}
	if err != nil {
		r.failed[id] = failure{err: err, at: time.Now()}
	} else {
		delete(r.failed, id)
	}
	lc.err = err
	delete(r.loading, id)
	close(lc.done)
	r.mu.Unlock()
	if err != nil {
		return codec.Dictionary{}, err
	}
	return d, nil
}

// Add gives the Resolver a dictionary it already has (for example one just
// trained), without reading Redis.
func (r *Resolver) Add(d codec.Dictionary) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.cur.Load().dicts[d.ID]; ok {
		return nil
	}
	return r.addLocked(d)
}

// addLocked builds the next generation with d added. codec.Decoders take
// their dictionaries at construction, so this builds a new one.
func (r *Resolver) addLocked(d codec.Dictionary) error {
	old := r.cur.Load()
	dicts := maps.Clone(old.dicts)
	dicts[d.ID] = d
	all := make([]codec.Dictionary, 0, len(dicts))
	for _, id := range slices.Sorted(maps.Keys(dicts)) {
		all = append(all, dicts[id])
	}
	dec, err := codec.NewDecoder(append(slices.Clone(r.opts), codec.WithDictionaries(all...))...)
	if err != nil {
		return fmt.Errorf("dictstore: dictionary %d: %w", d.ID, err)
	}
	r.cur.Store(&resolved{dec: dec, dicts: dicts})
	return nil
}

// Preload loads every dictionary listed in IndexKey, so that reads never
// wait for a load. It returns the first error, having loaded the others.
func (r *Resolver) Preload(ctx context.Context) error {
	metas, err := List(ctx, r.rdb)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range metas {
		if _, err := r.Dictionary(ctx, m.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// AppendDecode decodes src with the current Decoder, loading the
// dictionary a frame names when it is not known yet. It is the loop of the
// type's example, for callers that have a context at hand.
func (r *Resolver) AppendDecode(ctx context.Context, dst, src []byte) ([]byte, error) {
	out, err := r.Decoder().AppendDecode(dst, src)
	if err == nil || !errors.Is(err, codec.ErrUnknownDictionary) {
		return out, err
	}
	h, herr := codec.ParseHeader(src)
	if herr != nil {
		return dst, err
	}
	dec, rerr := r.Refresh(ctx, h.DictID)
	if rerr != nil {
		return dst, fmt.Errorf("%w: %w", err, rerr)
	}
	return dec.AppendDecode(dst, src)
}
