package codec

import (
	"errors"
	"fmt"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/zstd"
)

// A Dictionary is a trained zstd dictionary. Small values (a few hundred
// bytes of JSON) share most of their structure with each other but not with
// themselves, so they compress poorly alone and well against a dictionary
// trained on their peers. Frames compressed with a dictionary carry its ID;
// a Decoder needs the same dictionary to read them.
type Dictionary struct {
	ID   uint32 // the zstd dictionary ID, also written in every frame
	Data []byte // a dictionary in zstd's format (TrainDictionary, or zstd --train)
}

// TrainDictionary builds a zstd dictionary of at most maxSize bytes from
// sample values, with the given ID (1 to 2^31-1; IDs below 32768 are reserved
// by zstd's registry, so pick one above). It needs at least a handful of
// samples whose total size exceeds maxSize several times.
func TrainDictionary(id uint32, samples [][]byte, maxSize int) (Dictionary, error) {
	if id == 0 || id >= 1<<31 {
		return Dictionary{}, fmt.Errorf("codec: dictionary id %d out of range 1..2^31-1", id)
	}
	if len(samples) < 8 {
		return Dictionary{}, fmt.Errorf("codec: %d samples are too few to train a dictionary (want at least 8)", len(samples))
	}
	if maxSize < 256 {
		return Dictionary{}, fmt.Errorf("codec: dictionary size %d too small (want at least 256)", maxSize)
	}
	data, err := dict.BuildZstdDict(samples, dict.Options{MaxDictSize: maxSize, HashBytes: 6, ZstdDictID: id, ZstdLevel: zstd.SpeedDefault})
	if err != nil {
		return Dictionary{}, fmt.Errorf("codec: train dictionary: %w", err)
	}
	return Dictionary{ID: id, Data: data}, nil
}

// validate checks that d.Data is a zstd dictionary whose ID is d.ID.
func (d Dictionary) validate() error {
	info, err := zstd.InspectDictionary(d.Data)
	if err != nil {
		return fmt.Errorf("codec: dictionary %d: %w", d.ID, err)
	}
	if info.ID() != d.ID {
		return fmt.Errorf("codec: dictionary data has id %d, not %d", info.ID(), d.ID)
	}
	if d.ID == 0 {
		return errors.New("codec: dictionary id 0 is reserved")
	}
	return nil
}

// WithDictionary compresses with a trained dictionary (zstd only). Frames
// then carry the dictionary's ID, and readers need WithDictionaries.
func WithDictionary(d Dictionary) EncoderOption {
	return func(e *Encoder) error {
		if err := d.validate(); err != nil {
			return err
		}
		if e.alg.ID != IDZstd {
			return fmt.Errorf("codec: dictionaries work with zstd, not %s", e.alg.ID)
		}
		e.dict = &d
		return nil
	}
}

// WithDictionaries gives a Decoder the dictionaries that frames may name.
func WithDictionaries(ds ...Dictionary) DecoderOption {
	return func(dec *Decoder) error {
		for _, d := range ds {
			if err := d.validate(); err != nil {
				return err
			}
			if dec.dicts == nil {
				dec.dicts = map[uint64]bool{}
			}
			dec.dicts[uint64(d.ID)] = true
			dec.dictData = append(dec.dictData, d.Data)
		}
		return nil
	}
}
