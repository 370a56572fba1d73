package dictstore

import (
	"fmt"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/zstd"
)

// buildZstdDict builds a zstd dictionary with the given id of at most
// maxSize bytes of history from input, with klauspost/compress's builder.
// The builder iterates Go maps, so two runs on the same input may give
// different dictionaries (and so different ids, see DeriveID).
func buildZstdDict(id uint32, input [][]byte, maxSize int) (d []byte, err error) {
	defer func() {
		if r := recover(); r != nil { // the library's bug must not take the caller down
			d, err = nil, fmt.Errorf("zstd dictionary builder failed: %v", r)
		}
	}()
	return dict.BuildZstdDict(input, dict.Options{MaxDictSize: maxSize, HashBytes: 6, ZstdDictID: id, ZstdLevel: zstd.SpeedDefault})
}
