package proxy

import (
	"context"
	"errors"
	"sync"

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

// serverDicts maps a *Server to its Dictionaries. It lives beside the
// Server rather than in it while server.go is being reworked; a Server
// field is the intended home.
var serverDicts sync.Map

// SetDictionaries makes s decode frames naming dictionaries with d, which
// loads dictionaries it does not know yet (a frame written by another proxy
// with a dictionary published after this one started). Call it before
// Serve; nil removes it. Without it, such frames fail with an -ERR naming
// the key and wrapping codec.ErrUnknownDictionary, unless Server.Decoder
// was built with the dictionary.
func (s *Server) SetDictionaries(d Dictionaries) {
	if d == nil {
		serverDicts.Delete(s)
		return
	}
	serverDicts.Store(s, d)
}

// dictionaries returns the Dictionaries of s, or nil.
func (s *Server) dictionaries() Dictionaries {
	d, ok := serverDicts.Load(s)
	if !ok {
		return nil
	}
	return d.(Dictionaries)
}

// decodeValue appends the value stored as frame (h is its parsed header)
// to dst, with s's decoder, or with its Dictionaries when the frame names a
// dictionary.
func (s *Server) decodeValue(dst, frame []byte, h *codec.Header) ([]byte, error) {
	if h.HasDict {
		if d := s.dictionaries(); d != nil {
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
