// Package packgen writes git pack files and their version 2 indexes byte by byte,
// including ones no git would write: entries whose headers, deltas, zlib streams
// or index CRCs lie. It generates the hostile-pack corpus of the gitree package's
// tests (backends/gitree/testdata/hostile, see hostile_test.go there).
//
// Its output depends on nothing but its input: zlib streams are written by hand
// (stored blocks, or fixed-Huffman runs of zeros), never through compress/flate,
// whose output may change between Go versions, so the corpus regenerates byte
// for byte.
package packgen

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"sort"
)

// Pack entry types.
const (
	Commit   = 1
	Tree     = 2
	Blob     = 3
	Tag      = 4
	OfsDelta = 6
	RefDelta = 7
)

// ID is a git object id (SHA-1).
type ID [20]byte

// ObjectID returns the id git gives an object of type typ ("blob", "tree") and
// content data.
func ObjectID(typ string, data []byte) ID {
	return ID(sha1.Sum(append([]byte(fmt.Sprintf("%s %d\x00", typ, len(data))), data...)))
}

// FakeID returns an id derived from name, for objects whose content is not real.
func FakeID(name string) ID { return ID(sha1.Sum([]byte("packgen " + name))) }

// Hex returns id in hexadecimal.
func (id ID) Hex() string { return fmt.Sprintf("%x", id[:]) }

// Entry is one pack entry.
type Entry struct {
	ID   ID    // its name in the index
	Type int   // the header's 3-bit type (0 to 7, valid or not)
	Size int64 // the size the header declares
	// Base is, for an OFS_DELTA, the index in the entry list of its base (an
	// earlier entry), unless SetDistance: then Distance is written as is.
	Base        int
	Distance    uint64
	SetDistance bool
	BaseID      ID     // a REF_DELTA's base
	Data        []byte // the entry's data as written: usually a zlib stream
	BadCRC      bool   // record a wrong CRC in the index
	// Raw, when set, is written as the whole entry instead of a header and Data.
	Raw []byte
}

// Build returns a pack holding entries, in order, and its version 2 index.
func Build(entries []Entry) (pack, idx []byte) {
	var p bytes.Buffer
	p.WriteString("PACK")
	binary.Write(&p, binary.BigEndian, uint32(2))
	binary.Write(&p, binary.BigEndian, uint32(len(entries)))
	offs := make([]int64, len(entries))
	crcs := make([]uint32, len(entries))
	for i, e := range entries {
		offs[i] = int64(p.Len())
		var h []byte
		c := byte(e.Type&7)<<4 | byte(e.Size&15)
		rest := uint64(e.Size) >> 4
		for rest > 0 {
			h = append(h, c|0x80)
			c = byte(rest & 0x7f)
			rest >>= 7
		}
		h = append(h, c)
		switch e.Type {
		case OfsDelta:
			d := e.Distance
			if !e.SetDistance {
				d = uint64(offs[i] - offs[e.Base])
			}
			h = append(h, ofsEncode(d)...)
		case RefDelta:
			h = append(h, e.BaseID[:]...)
		}
		h = append(h, e.Data...)
		if e.Raw != nil {
			h = e.Raw
		}
		crcs[i] = crc32.ChecksumIEEE(h)
		if e.BadCRC {
			crcs[i] ^= 0xdeadbeef
		}
		p.Write(h)
	}
	sum := sha1.Sum(p.Bytes())
	p.Write(sum[:])

	order := make([]int, len(entries))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		return bytes.Compare(entries[order[a]].ID[:], entries[order[b]].ID[:]) < 0
	})
	var x bytes.Buffer
	x.Write([]byte{0xff, 't', 'O', 'c', 0, 0, 0, 2})
	var fan [256]uint32
	for _, e := range entries {
		for b := int(e.ID[0]); b < 256; b++ {
			fan[b]++
		}
	}
	binary.Write(&x, binary.BigEndian, fan)
	for _, i := range order {
		x.Write(entries[i].ID[:])
	}
	for _, i := range order {
		binary.Write(&x, binary.BigEndian, crcs[i])
	}
	for _, i := range order {
		binary.Write(&x, binary.BigEndian, uint32(offs[i]))
	}
	x.Write(sum[:])
	isum := sha1.Sum(x.Bytes())
	x.Write(isum[:])
	return p.Bytes(), x.Bytes()
}

// ofsEncode writes an OFS_DELTA base distance as git does (big-endian base 128,
// each continued byte's value one less).
func ofsEncode(d uint64) []byte {
	b := []byte{byte(d & 0x7f)}
	for d >>= 7; d > 0; d >>= 7 {
		d--
		b = append([]byte{byte(0x80 | d&0x7f)}, b...)
	}
	return b
}

// Stored returns a zlib stream of data in stored (uncompressed) deflate blocks.
func Stored(data []byte) []byte {
	sum := adler32.Checksum(data)
	b := []byte{0x78, 0x01}
	for first := true; first || len(data) > 0; first = false {
		n := min(len(data), 65535)
		final := byte(0)
		if n == len(data) {
			final = 1
		}
		b = append(b, final, byte(n), byte(n>>8), ^byte(n), ^byte(n>>8))
		b = append(b, data[:n]...)
		data = data[n:]
	}
	return binary.BigEndian.AppendUint32(b, sum)
}

// Zeros returns a zlib stream inflating to n zero bytes (n ≥ 1) in one fixed-
// Huffman block: a literal, then matches of distance 1. It is about n/160 bytes
// long: the shape of an inflate bomb.
func Zeros(n int) []byte {
	var w bitWriter
	w.bits(0x78, 8)
	w.bits(0x01, 8)
	w.bits(1, 1) // final
	w.bits(1, 2) // fixed Huffman
	w.code(0x30, 8)
	for left := n - 1; left > 0; {
		switch {
		case left >= 258+3 || left == 258:
			w.code(0xc5, 8) // length 258 (symbol 285)
			left -= 258
		case left >= 3 && left <= 10:
			w.code(uint32(left-2), 7) // lengths 3 to 10: symbols 257 to 264
			left = 0
		case left >= 3:
			w.code(0x08, 7) // length 10 (symbol 264)
			left -= 10
		default:
			w.code(0x30, 8) // a literal zero
			left--
			continue
		}
		w.code(0, 5) // distance 1
	}
	w.code(0, 7) // end of block
	w.flush()
	a := adler32.New()
	zero := make([]byte, 64<<10)
	for left := n; left > 0; left -= min(left, len(zero)) {
		a.Write(zero[:min(left, len(zero))])
	}
	return binary.BigEndian.AppendUint32(w.b, a.Sum32())
}

type bitWriter struct {
	b  []byte
	v  uint64
	nb uint
}

// bits writes the low n bits of v, least significant first.
func (w *bitWriter) bits(v uint32, n uint) {
	w.v |= uint64(v) << w.nb
	w.nb += n
	for w.nb >= 8 {
		w.b = append(w.b, byte(w.v))
		w.v >>= 8
		w.nb -= 8
	}
}

// code writes an n-bit Huffman code, most significant bit first.
func (w *bitWriter) code(c uint32, n uint) {
	for i := int(n) - 1; i >= 0; i-- {
		w.bits(c>>uint(i)&1, 1)
	}
}

func (w *bitWriter) flush() {
	if w.nb > 0 {
		w.b = append(w.b, byte(w.v))
		w.v, w.nb = 0, 0
	}
}

// Delta returns a git delta: the base and result sizes, then the instructions.
func Delta(srcSize, dstSize uint64, ops ...[]byte) []byte {
	b := binary.AppendUvarint(nil, srcSize)
	b = binary.AppendUvarint(b, dstSize)
	for _, op := range ops {
		b = append(b, op...)
	}
	return b
}

// Copy is a delta instruction copying size bytes (1 to 0xffffff) at off of the base.
func Copy(off, size uint32) []byte {
	op := []byte{0x80}
	for i := 0; i < 4; i++ {
		if v := byte(off >> (8 * i)); v != 0 {
			op[0] |= 1 << i
			op = append(op, v)
		}
	}
	if size != 0x10000 {
		for i := 0; i < 3; i++ {
			if v := byte(size >> (8 * i)); v != 0 {
				op[0] |= 1 << (4 + i)
				op = append(op, v)
			}
		}
	}
	return op
}

// Insert is a delta instruction inserting data (1 to 127 bytes).
func Insert(data []byte) []byte { return append([]byte{byte(len(data))}, data...) }

// TreeEntry is one entry of a tree object.
type TreeEntry struct {
	Mode string // "100644", "40000"
	Name string
	ID   ID
}

// TreeData returns a tree object's content.
func TreeData(entries ...TreeEntry) []byte {
	var b []byte
	for _, e := range entries {
		b = append(b, e.Mode+" "+e.Name+"\x00"...)
		b = append(b, e.ID[:]...)
	}
	return b
}
