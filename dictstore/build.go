package dictstore

import (
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// buildZstdDict builds a zstd dictionary with the given id of at most
// maxSize bytes of history from input: buildHistory picks the history,
// klauspost/compress's zstd.BuildDict adds the entropy tables. Both are
// deterministic, so the same input gives the same bytes (and so the same
// id, see DeriveID).
func buildZstdDict(id uint32, input [][]byte, maxSize int) (d []byte, err error) {
	defer func() {
		if r := recover(); r != nil { // the library's bug must not take the caller down
			d, err = nil, fmt.Errorf("zstd dictionary builder failed: %v", r)
		}
	}()
	history, offsets, err := buildHistory(input, maxSize)
	if err != nil {
		return nil, err
	}
	return zstd.BuildDict(zstd.BuildDictOptions{ID: id, Contents: input, History: history, Offsets: offsets, Level: zstd.SpeedDefault})
}
