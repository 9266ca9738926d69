package pack

import (
	"math/bits"
)

// huffman is a two-level table for canonical Huffman codes of at most 15 bits. An
// entry is either a leaf (bit 8 clear): symbol << 16 | code length, or a link
// (bit 8 set): sub-table start << 16 | 0x100 | sub-table index bits.
type huffman struct {
	primary [1 << primaryBits]uint32
	sub     []uint32
}

// init builds h from code lengths (0: symbol unused). As compress/flate does,
// it accepts only complete codes, and two degenerate ones zlib also accepts: no
// code at all (decoding any symbol is then an error) and a single code of one
// bit (decoding the other bit is an error). Incomplete and over-subscribed codes
// are refused.
func (h *huffman) init(lengths []uint8) error {
	var count [16]int
	maxLen := 0
	for _, l := range lengths {
		count[l]++
		if int(l) > maxLen {
			maxLen = int(l)
		}
	}
	count[0] = 0
	left := 1
	for l := 1; l <= 15; l++ {
		left = left<<1 - count[l]
		if left < 0 {
			return errFlate // over-subscribed
		}
	}
	if left != 0 && maxLen != 0 && !(maxLen == 1 && count[1] == 1) {
		return errFlate // incomplete
	}
	var next [16]int
	code := 0
	for l := 1; l <= 15; l++ {
		code = (code + count[l-1]) << 1
		next[l] = code
	}
	clear(h.primary[:])
	h.sub = h.sub[:0]
	subBits := max(maxLen-primaryBits, 0)
	for s, l := range lengths {
		if l == 0 {
			continue
		}
		c := next[l]
		next[l]++
		rev := int(bits.Reverse16(uint16(c)) >> (16 - l))
		if int(l) <= primaryBits {
			leaf := uint32(s)<<16 | uint32(l)
			for j := rev; j < 1<<primaryBits; j += 1 << l {
				h.primary[j] = leaf
			}
			continue
		}
		low := rev & (1<<primaryBits - 1)
		link := h.primary[low]
		if link&0x100 == 0 {
			link = uint32(len(h.sub))<<16 | 0x100 | uint32(subBits)
			h.primary[low] = link
			h.sub = append(h.sub, make([]uint32, 1<<subBits)...)
		}
		start := int(link >> 16)
		leaf := uint32(s)<<16 | uint32(l)
		for j := rev >> primaryBits; j < 1<<subBits; j += 1 << (int(l) - primaryBits) {
			h.sub[start+j] = leaf
		}
	}
	return nil
}

func fixedTables() (*huffman, *huffman) {
	fixedOnce.Do(func() {
		var l [288]uint8
		for i := range l {
			switch {
			case i < 144:
				l[i] = 8
			case i < 256:
				l[i] = 9
			case i < 280:
				l[i] = 7
			default:
				l[i] = 8
			}
		}
		fixedLit.init(l[:])
		// 32 distance codes of 5 bits: 30 and 31 decode, and are refused where
		// they are used.
		var d [32]uint8
		for i := range d {
			d[i] = 5
		}
		fixedDist.init(d[:])
	})
	return &fixedLit, &fixedDist
}
