package proxy

import (
	"context"
	"errors"

	"github.com/squeeze-kv/squeeze/codec"
)

// Dictionaries is what a Server asks about frames that name a zstd
// dictionary: a Decoder that knows the dictionaries loaded so far, and a
// decode that loads a missing one first (from Redis, for the
// *dictstore.Resolver that implements it). Both must be safe for
// concurrent use, and Decoder must be cheap: it is called for every value
// that names a dictionary.
type Dictionaries interface {
	Decoder() *codec.Decoder
	AppendDecode(ctx context.Context, dst, src []byte) ([]byte, error)
}

// decodeValue appends the value stored as frame (h is its parsed header)
// to dst, with s's decoder, or with its Dictionaries when the frame names a
// dictionary.
func (s *Server) decodeValue(dst, frame []byte, h *codec.Header) ([]byte, error) {
	if h.HasDict {
		if d := s.Dictionaries; d != nil {
			out, err := d.Decoder().AppendDecode(dst, frame)
			if !errors.Is(err, codec.ErrUnknownDictionary) {
				return out, err
			}
			// Not known yet: load it (once, whoever asks first) and retry.
			return d.AppendDecode(context.Background(), dst, frame)
		}
	}
	return s.decoder().AppendDecode(dst, frame)
}
