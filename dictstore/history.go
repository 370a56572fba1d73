// This file adapts buildDict of github.com/klauspost/compress/dict
// (builder.go, v1.20.4), whose copyright and license follow, so that the
// same samples always give the same dictionary: the original walks Go maps,
// whose order changes from run to run, so training twice gave two
// dictionaries with two ids. Here every map is walked in the order of its
// sorted keys; the algorithm is otherwise the same, minus its debug output
// and its raw and S2 output formats.
//
// Copyright 2023+ Klaus Post. All rights reserved.
// Copyright (c) 2012 The Go Authors. All rights reserved.
// Copyright (c) 2019 Klaus Post. All rights reserved.
//
// Redistribution and use in source and binary forms, with or without
// modification, are permitted provided that the following conditions are
// met:
//
//   - Redistributions of source code must retain the above copyright
//     notice, this list of conditions and the following disclaimer.
//   - Redistributions in binary form must reproduce the above
//     copyright notice, this list of conditions and the following disclaimer
//     in the documentation and/or other materials provided with the
//     distribution.
//   - Neither the name of Google Inc. nor the names of its
//     contributors may be used to endorse or promote products derived from
//     this software without specific prior written permission.
//
// THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS
// "AS IS" AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT
// LIMITED TO, THE IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR
// A PARTICULAR PURPOSE ARE DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT
// OWNER OR CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL,
// SPECIAL, EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT
// LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES; LOSS OF USE,
// DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON ANY
// THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT
// (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
// OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.

package dictstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"maps"
	"slices"
	"sort"
)

// historyHashBytes is the length of the strings the builder counts (the
// original's Options.HashBytes, 6 as squeeze always used it).
const historyHashBytes = 6

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

// sortedKeys returns the keys of m in increasing order: the order every
// map of the builder is walked in.
func sortedKeys[V any](m map[uint32]V) []uint32 {
	return slices.Sorted(maps.Keys(m))
}

// hash6 is the original's hashLen for 6 bytes and a 32-bit table.
func hash6(u uint64) uint32 {
	const prime6bytes = 227718039650203
	return uint32(((u << (64 - 48)) * prime6bytes) >> (64 - 32))
}

// buildHistory picks the strings that recur across input, up to maxSize
// bytes, as the history (content) of a zstd dictionary, and the three
// repeat offsets the dictionary should start with. It is deterministic:
// the same input gives the same history and offsets.
func buildHistory(input [][]byte, maxSize int) (history []byte, offsets [3]int, err error) {
	const hashBytes = historyHashBytes
	if len(input) == 0 {
		return nil, offsets, errors.New("no input provided")
	}
	if maxSize <= 0 {
		return nil, offsets, errors.New("MaxDictSize must be > 0")
	}
	matches := make(map[uint32]uint32)
	offs := make(map[uint32]int64)
	var total uint64
	found := make(map[uint32]struct{})
	for _, b := range input {
		clear(found)
		for i := range b {
			rem := b[i:]
			if len(rem) < 8 {
				break
			}
			h := hash6(binary.LittleEndian.Uint64(rem))
			if _, ok := found[h]; ok {
				continue // only the first occurrence in an input counts
			}
			matches[h]++
			offs[h] += int64(i)
			total++
			found[h] = struct{}{}
		}
	}
	if len(matches) == 0 {
		return nil, offsets, errors.New("no input is 8 bytes or longer")
	}
	threshold := uint32(total / uint64(len(matches)))
	sorted := make([]histMatch, 0, len(matches)/2)
	for _, k := range sortedKeys(matches) {
		if v := matches[k]; v > threshold {
			sorted = append(sorted, histMatch{hash: k, n: v, offset: offs[k]})
		}
	}
	if len(sorted) == 0 {
		// A single input, or inputs that are identical or share nothing.
		return nil, offsets, errors.New("no content is repeated more than average across inputs")
	}
	sort.Slice(sorted, func(i, j int) bool {
		// Group very similar counts together and emit low offsets first,
		// which keeps strings that are very similar together.
		deltaN := int(sorted[i].n) - int(sorted[j].n)
		if deltaN < 0 {
			deltaN = -deltaN
		}
		if uint32(deltaN) < sorted[i].n/32 {
			return sorted[i].offset < sorted[j].offset
		}
		return sorted[i].n > sorted[j].n
	})
	if len(sorted) > maxSize {
		sorted = sorted[:maxSize]
	}
	lowestOcc := sorted[len(sorted)-1].n

	wantMatches := make(map[uint32]uint32, len(sorted))
	for _, v := range sorted {
		wantMatches[v.hash] = v.n
	}
	output := make(map[uint32]histValue, len(sorted))
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
			h := hash6(binary.LittleEndian.Uint64(rem))
			if _, ok := wantMatches[h]; !ok {
				continue
			}
			mv := output[h]
			if len(mv.value) == 0 {
				mv.value = slices.Clone(rem[:hashBytes])
			}
			if mv.followBy == nil {
				mv.followBy = make(map[uint32]uint32, 4)
				mv.preceededBy = make(map[uint32]uint32, 4)
			}
			if len(rem) > hashBytes+8 {
				hNext := hash6(binary.LittleEndian.Uint64(rem[hashBytes:]))
				if _, ok := wantMatches[hNext]; ok {
					mv.followBy[hNext]++
				}
			}
			if len(prev) >= 8 {
				hPrev := hash6(binary.LittleEndian.Uint64(prev))
				if _, ok := wantMatches[hPrev]; ok {
					mv.preceededBy[hPrev]++
				}
			}
			output[h] = mv
		}
	}

	dst := make([][]byte, 0, maxSize/hashBytes)
	added := 0
	var firstOffsets []int
	for _, e := range sorted {
		if added > maxSize {
			break
		}
		m, ok := output[e.hash]
		if !ok {
			continue // already added
		}
		wantLen := max(e.n/uint32(hashBytes)/4, lowestOcc)
		tmp := make([]byte, 0, hashBytes*2)
		{
			var sortedPrev []histMatch
			for _, k := range sortedKeys(m.preceededBy) {
				v := m.preceededBy[k]
				if _, ok := output[k]; v < wantLen || !ok {
					continue
				}
				sortedPrev = append(sortedPrev, histMatch{hash: k, n: v})
			}
			if len(sortedPrev) > 0 {
				sort.Slice(sortedPrev, func(i, j int) bool { return sortedPrev[i].n > sortedPrev[j].n })
				tmp = append(tmp, output[sortedPrev[0].hash].value...)
			}
		}
		tmp = append(tmp, m.value...)
		delete(output, e.hash)

		sortedFollow := make([]histMatch, 0, len(m.followBy))
		for {
			sortedFollow = sortedFollow[:0]
			for _, k := range sortedKeys(m.followBy) {
				if _, ok := output[k]; ok {
					sortedFollow = append(sortedFollow, histMatch{hash: k, n: m.followBy[k], offset: offs[k]})
				}
			}
			if len(sortedFollow) == 0 {
				// Step back: a small gain for longer hashes.
				const stepBack = 2
				if len(tmp) >= hashBytes+stepBack {
					var t8 [8]byte
					copy(t8[:], tmp[len(tmp)-hashBytes-stepBack:])
					m, ok = output[hash6(binary.LittleEndian.Uint64(t8[:]))]
					if ok && len(m.followBy) > 0 {
						var next []byte
						for _, k := range sortedKeys(m.followBy) {
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
			sort.Slice(sortedFollow, func(i, j int) bool {
				if sortedFollow[i].n == sortedFollow[j].n {
					return sortedFollow[i].offset > sortedFollow[j].offset
				}
				return sortedFollow[i].n > sortedFollow[j].n
			})
			nh := sortedFollow[0].hash
			stopAfter := sortedFollow[0].n < wantLen
			m, ok = output[nh]
			if !ok {
				break
			}
			if len(tmp) > 0 {
				// Delete all hashes in the current string, against stuttering.
				var toDel [16 + 8]byte
				copy(toDel[:], tmp[len(tmp)-hashBytes:])
				copy(toDel[hashBytes:], m.value)
				for i := range toDel[:hashBytes*2] {
					delete(output, hash6(binary.LittleEndian.Uint64(toDel[i:])))
				}
			}
			tmp = append(tmp, m.value...)
			if stopAfter {
				break // the last entry was not significant
			}
		}
		// Delete the substrings already added.
		if len(tmp) > hashBytes {
			for j := range tmp[:len(tmp)-hashBytes+1] {
				var t8 [8]byte
				copy(t8[:], tmp[j:])
				delete(output, hash6(binary.LittleEndian.Uint64(t8[:])))
			}
		}
		dst = append(dst, tmp)
		added += len(tmp)
		// The first offsets: where the first strings most often sit.
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
				// The most frequent; on ties the longer offset, which is
				// more expensive to encode.
				if v := offCnt[k]; v > maxCnt || v == maxCnt && k > maxOffset {
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
	for i, toWrite := range dst {
		if len(toWrite)+written > maxSize {
			toWrite = toWrite[:maxSize-written]
		}
		dst[i] = toWrite
		written += len(toWrite)
		if written >= maxSize {
			dst = dst[:i+1]
			break
		}
	}
	for i := range dst { // in reverse order: the most common strings last, nearest the data
		out.Write(dst[len(dst)-i-1])
	}
	offsets = [3]int{1, 4, 8}
	for i, off := range firstOffsets {
		if i >= 3 || off == 0 || off >= out.Len() {
			break
		}
		offsets[i] = off
	}
	return out.Bytes(), offsets, nil
}
