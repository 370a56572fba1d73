// The history builder below is adapted from github.com/klauspost/compress
// dict/builder.go (v1.20.4), Copyright 2023+ Klaus Post, under the BSD-style
// license of that module. The algorithm is unchanged; what changed is that
// every map is iterated in sorted key order and every sort breaks ties, so
// the same samples always give the same dictionary bytes (the original
// iterates Go maps, whose order is random, and gives a different dictionary
// on each run). Train derives dictionary ids from the bytes, so determinism
// is what makes two trainings of the same data agree on the id.

package dictstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/klauspost/compress/zstd"
)

// hashBytes is the length of the strings the builder counts.
const hashBytes = 6

type histMatch struct {
	hash   uint32
	n      uint32
	offset int64
}

type histValue struct {
	value       []byte
	followBy    map[uint32]uint32
	preceededBy map[uint32]uint32
}

// buildZstdDict builds a zstd dictionary with the given id of at most
// maxSize bytes of history from input, deterministically.
func buildZstdDict(id uint32, input [][]byte, maxSize int) (dict []byte, err error) {
	defer func() {
		if r := recover(); r != nil { // the library's bug must not take the caller down
			dict, err = nil, fmt.Errorf("zstd dictionary builder failed: %v", r)
		}
	}()
	hist, offs, err := buildHistory(input, maxSize)
	if err != nil {
		return nil, err
	}
	return zstd.BuildDict(zstd.BuildDictOptions{
		ID:       id,
		Contents: input,
		History:  hist,
		Offsets:  offs,
		Level:    zstd.SpeedDefault,
	})
}

func buildHistory(input [][]byte, wantLen int) ([]byte, [3]int, error) {
	offsetsZstd := [3]int{1, 4, 8}
	matches := make(map[uint32]uint32)
	offsets := make(map[uint32]int64)
	var total uint64
	if len(input) == 0 {
		return nil, offsetsZstd, errors.New("no input provided")
	}
	found := make(map[uint32]struct{})
	for _, b := range input {
		clear(found)
		for i := range b {
			rem := b[i:]
			if len(rem) < 8 {
				break
			}
			h := histHash(binary.LittleEndian.Uint64(rem))
			if _, ok := found[h]; ok {
				continue // only count the first occurrence
			}
			matches[h]++
			offsets[h] += int64(i)
			total++
			found[h] = struct{}{}
		}
	}
	if len(matches) == 0 {
		return nil, offsetsZstd, errors.New("no sample is 8 bytes or longer")
	}
	threshold := uint32(total / uint64(len(matches)))
	sorted := make([]histMatch, 0, len(matches)/2)
	for _, k := range slices.Sorted(maps.Keys(matches)) {
		if v := matches[k]; v > threshold {
			sorted = append(sorted, histMatch{hash: k, n: v, offset: offsets[k]})
		}
	}
	if len(sorted) == 0 {
		return nil, offsetsZstd, errors.New("no content is repeated more than average across the samples")
	}
	// Group very similar counts together and emit low offsets first, so
	// that similar strings stay together. The comparison is not a strict
	// order, so the (sorted, hence deterministic) input order matters.
	sort.Slice(sorted, func(i, j int) bool {
		deltaN := int(sorted[i].n) - int(sorted[j].n)
		if deltaN < 0 {
			deltaN = -deltaN
		}
		if uint32(deltaN) < sorted[i].n/32 {
			return sorted[i].offset < sorted[j].offset
		}
		return sorted[i].n > sorted[j].n
	})
	if len(sorted) > wantLen {
		sorted = sorted[:wantLen]
	}
	lowestOcc := sorted[len(sorted)-1].n

	wantMatches := make(map[uint32]uint32, len(sorted))
	for _, v := range sorted {
		wantMatches[v.hash] = v.n
	}
	output := make(map[uint32]histValue, len(sorted))
	var firstOffsets []int
	for _, b := range input {
		for i := range b {
			rem := b[i:]
			if len(rem) < 8 {
				break
			}
			var prev []byte
			if i > hashBytes {
				prev = b[i-hashBytes:]
			}
			h := histHash(binary.LittleEndian.Uint64(rem))
			if _, ok := wantMatches[h]; !ok {
				continue
			}
			mv := output[h]
			if len(mv.value) == 0 {
				mv.value = append([]byte(nil), rem[:hashBytes]...)
			}
			if mv.followBy == nil {
				mv.followBy = make(map[uint32]uint32, 4)
				mv.preceededBy = make(map[uint32]uint32, 4)
			}
			if len(rem) > hashBytes+8 {
				hNext := histHash(binary.LittleEndian.Uint64(rem[hashBytes:]))
				if _, ok := wantMatches[hNext]; ok {
					mv.followBy[hNext]++
				}
			}
			if len(prev) >= 8 {
				hPrev := histHash(binary.LittleEndian.Uint64(prev))
				if _, ok := wantMatches[hPrev]; ok {
					mv.preceededBy[hPrev]++
				}
			}
			output[h] = mv
		}
	}
	dst := make([][]byte, 0, wantLen/hashBytes)
	added := 0
	for _, e := range sorted {
		if added > wantLen {
			break
		}
		m, ok := output[e.hash]
		if !ok {
			continue // already added
		}
		want := max(e.n/uint32(hashBytes)/4, lowestOcc)
		tmp := make([]byte, 0, hashBytes*2)
		var sortedPrev []histMatch
		for _, k := range slices.Sorted(maps.Keys(m.preceededBy)) {
			if _, ok := output[k]; m.preceededBy[k] < want || !ok {
				continue
			}
			sortedPrev = append(sortedPrev, histMatch{hash: k, n: m.preceededBy[k]})
		}
		if len(sortedPrev) > 0 {
			sort.SliceStable(sortedPrev, func(i, j int) bool { return sortedPrev[i].n > sortedPrev[j].n })
			tmp = append(tmp, output[sortedPrev[0].hash].value...)
		}
		tmp = append(tmp, m.value...)
		delete(output, e.hash)

		var sortedFollow []histMatch
		for {
			sortedFollow = sortedFollow[:0]
			for _, k := range slices.Sorted(maps.Keys(m.followBy)) {
				if _, ok := output[k]; ok {
					sortedFollow = append(sortedFollow, histMatch{hash: k, n: m.followBy[k], offset: offsets[k]})
				}
			}
			if len(sortedFollow) == 0 {
				// Step back two bytes and look for a continuation there.
				const stepBack = 2
				if len(tmp) >= hashBytes+stepBack {
					var t8 [8]byte
					copy(t8[:], tmp[len(tmp)-hashBytes-stepBack:])
					m, ok = output[histHash(binary.LittleEndian.Uint64(t8[:]))]
					if ok && len(m.followBy) > 0 {
						var next []byte
						for _, k := range slices.Sorted(maps.Keys(m.followBy)) {
							if v, ok := output[k]; ok {
								next = v.value
								break
							}
						}
						if next != nil {
							tmp = tmp[:len(tmp)-stepBack]
							continue
						}
					}
				}
				break
			}
			sort.SliceStable(sortedFollow, func(i, j int) bool {
				if sortedFollow[i].n == sortedFollow[j].n {
					return sortedFollow[i].offset > sortedFollow[j].offset
				}
				return sortedFollow[i].n > sortedFollow[j].n
			})
			nh := sortedFollow[0].hash
			stopAfter := sortedFollow[0].n < want
			if m, ok = output[nh]; !ok {
				break
			}
			if len(tmp) > 0 {
				// Delete the hashes inside the joint to avoid stuttering.
				var toDel [16 + 8]byte
				copy(toDel[:], tmp[len(tmp)-hashBytes:])
				copy(toDel[hashBytes:], m.value)
				for i := range toDel[:hashBytes*2] {
					delete(output, histHash(binary.LittleEndian.Uint64(toDel[i:])))
				}
			}
			tmp = append(tmp, m.value...)
			if stopAfter {
				break
			}
		}
		// Delete the substrings already added.
		if len(tmp) > hashBytes {
			for j := range tmp[:len(tmp)-hashBytes+1] {
				var t8 [8]byte
				copy(t8[:], tmp[j:])
				delete(output, histHash(binary.LittleEndian.Uint64(t8[:])))
			}
		}
		dst = append(dst, tmp)
		added += len(tmp)
		// The most common first offsets become zstd's initial repeat offsets.
		if len(firstOffsets) < 3 {
			if len(tmp) > 16 {
				tmp = tmp[:16]
			}
			offCnt := make(map[int]int, len(input))
			for _, b := range input {
				if off := bytes.Index(b, tmp); off != -1 {
					offCnt[off]++
				}
			}
			for _, off := range firstOffsets {
				delete(offCnt, off-added)
			}
			maxCnt, maxOffset := 0, 0
			for _, k := range slices.Sorted(maps.Keys(offCnt)) {
				if v := offCnt[k]; v > maxCnt || (v == maxCnt && k > maxOffset) {
					maxCnt, maxOffset = v, k
				}
			}
			if maxCnt > 1 {
				firstOffsets = append(firstOffsets, maxOffset+added)
			}
		}
	}
	var out bytes.Buffer
	written := 0
	for i, w := range dst {
		if len(w)+written > wantLen {
			w = w[:wantLen-written]
		}
		dst[i] = w
		written += len(w)
		if written >= wantLen {
			dst = dst[:i+1]
			break
		}
	}
	for i := range dst { // in reverse: the most frequent last, closest to the data
		out.Write(dst[len(dst)-i-1])
	}
	for i, off := range firstOffsets {
		if i >= 3 || off == 0 || off >= out.Len() {
			break
		}
		offsetsZstd[i] = off
	}
	return out.Bytes(), offsetsZstd, nil
}

// prime6bytes is the multiplier of the original's 6-byte hash.
const prime6bytes = 227718039650203

// histHash returns the original's 32-bit hash of the lowest 6 bytes of u.
func histHash(u uint64) uint32 {
	return uint32(((u << (64 - 48)) * prime6bytes) >> 32)
}
