package pack

import (
	"encoding/binary"
	"errors"
	"hash/adler32"
	"hash/crc32"
	"io"
	"math/bits"
	"sync"
)

// A DEFLATE (RFC 1951) decoder inside a zlib (RFC 1950) stream that can stop and
// restart at block boundaries. compress/flate cannot: it hides where a block
// ends, and a deflate stream is only resumable there, from the bit position the
// next block starts at and the 32 KiB of output before it. The decoder reports
// those positions (its checkpoints) and can start from one, which is what lets a
// large blob's ReadAt jump near any offset instead of inflating from the start.
//
// It decodes in one of two modes: into a caller's buffer of the exact object
// size (whole objects), or through a sliding window (streams).

var errFlate = errors.New("corrupt deflate stream")

// windowSize is deflate's largest match distance: the history a checkpoint keeps.
const windowSize = 32 << 10

// maxMatch is the longest match deflate can copy.
const maxMatch = 258

// Decoder states.
const (
	stHeader  = iota // at a block boundary: the next block's header comes next
	stStored         // inside a stored block
	stHuffman        // inside a compressed block
	stDone           // after the final block
)

// primaryBits is the width of the first-level Huffman lookup.
const primaryBits = 9

var (
	fixedOnce           sync.Once
	fixedLit, fixedDist huffman
)

var (
	lenBase   = [29]uint16{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258}
	lenExtra  = [29]uint8{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
	distBase  = [30]uint32{1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577}
	distExtra = [30]uint8{0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13}
	clenOrder = [19]int{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}
)

// checkpoint is where a deflate stream can be resumed: the bit after a block's
// end, the output offset there, and the output's last (up to) 32 KiB before it.
type checkpoint struct {
	bit    int64 // in the input, counted from the input's start
	out    int64
	window []byte
}

// inflate is a deflate decoder over an input given whole (in) or read from an
// io.ReaderAt in chunks (src).
type inflate struct {
	src       io.ReaderAt // nil: in holds the whole input
	srcOff    int64       // offset in src of in[0]
	srcEnd    int64
	in        []byte
	ip        int
	bits      uint64
	nb        uint
	inputBase int64 // offset in src (or in) where the deflate data starts

	win    []byte // output: history, then output not yet consumed
	wpos   int    // end of the output in win
	rpos   int    // start of the output not yet consumed
	margin int    // room kept free at win's end in stream mode (maxMatch); 0 in whole mode
	out    int64  // stream offset of win[wpos]

	state     int
	final     bool
	stored    int
	lit, dist *huffman
	dyn       [2]huffman
	lens      [320]uint8

	// adler is the running checksum of the output, valid when the decoder started
	// at the stream's start (checkAdler).
	adler      uint32
	checkAdler bool
	adlerPos   int // win offset up to which output has been summed

	// crc is the running CRC-32 of the input chunks fill has read, when crcOn.
	crc   uint32
	crcOn bool

	// onBoundary, if set, is called at each block boundary before a non-final
	// block.
	onBoundary func(d *inflate)
}

// bitPos returns the input bit the decoder is at, counted from the deflate data's
// start.
func (d *inflate) bitPos() int64 {
	return (d.srcOff+int64(d.ip)-d.inputBase)*8 - int64(d.nb)
}

// refill tops the bit buffer up to at least 56 bits, or all the input left.
func (d *inflate) refill() error {
	for d.nb < 56 {
		if d.ip+8 <= len(d.in) {
			v := binary.LittleEndian.Uint64(d.in[d.ip:])
			d.bits |= v << d.nb
			k := (63 - d.nb) >> 3
			d.ip += int(k)
			d.nb += k << 3
			continue
		}
		if d.ip < len(d.in) {
			d.bits |= uint64(d.in[d.ip]) << d.nb
			d.ip++
			d.nb += 8
			continue
		}
		if d.src == nil || d.srcOff+int64(len(d.in)) >= d.srcEnd {
			return nil // end of input: callers check they have the bits they use
		}
		if err := d.fill(); err != nil {
			return err
		}
	}
	return nil
}

// fill reads the next chunk of input from src.
func (d *inflate) fill() error {
	d.srcOff += int64(len(d.in))
	n := min(int64(cap(d.in)), d.srcEnd-d.srcOff)
	d.in = d.in[:n]
	d.ip = 0
	k, err := d.src.ReadAt(d.in, d.srcOff)
	if k < len(d.in) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if d.crcOn {
		d.crc = crc32.Update(d.crc, crc32.IEEETable, d.in)
	}
	return nil
}

// getBits consumes n ≤ 32 bits.
func (d *inflate) getBits(n uint) (uint32, error) {
	if d.nb < n {
		if err := d.refill(); err != nil {
			return 0, err
		}
		if d.nb < n {
			return 0, io.ErrUnexpectedEOF
		}
	}
	v := uint32(d.bits & (1<<n - 1))
	d.bits >>= n
	d.nb -= n
	return v, nil
}

// symbol decodes one symbol of h.
func (d *inflate) symbol(h *huffman) (int, error) {
	if d.nb < 15 {
		if err := d.refill(); err != nil {
			return 0, err
		}
	}
	e := h.primary[d.bits&(1<<primaryBits-1)]
	if e&0x100 != 0 {
		e = h.sub[int(e>>16)+int((d.bits>>primaryBits)&(1<<(e&0xff)-1))]
	}
	l := uint(e & 0xff)
	if l == 0 || l > d.nb {
		if l == 0 {
			return 0, errFlate
		}
		return 0, io.ErrUnexpectedEOF
	}
	d.bits >>= l
	d.nb -= l
	return int(e >> 16), nil
}

// header reads a block header and sets up the block.
func (d *inflate) header() error {
	h, err := d.getBits(3)
	if err != nil {
		return err
	}
	d.final = h&1 != 0
	switch h >> 1 {
	case 0:
		// Stored: skip to a byte boundary, then LEN and its complement.
		d.bits >>= d.nb & 7
		d.nb -= d.nb & 7
		v, err := d.getBits(32)
		if err != nil {
			return err
		}
		if uint16(v) != ^uint16(v>>16) {
			return errFlate
		}
		d.stored = int(uint16(v))
		d.state = stStored
	case 1:
		d.lit, d.dist = fixedTables()
		d.state = stHuffman
	case 2:
		if err := d.dynamic(); err != nil {
			return err
		}
		d.state = stHuffman
	default:
		return errFlate
	}
	return nil
}

// dynamic reads the code lengths of a dynamic block and builds its tables.
func (d *inflate) dynamic() error {
	v, err := d.getBits(14)
	if err != nil {
		return err
	}
	nlit, ndist, nclen := int(v&31)+257, int(v>>5&31)+1, int(v>>10)+4
	if nlit > 286 || ndist > 30 {
		return errFlate
	}
	var ch huffman
	if err := d.codeLengthCode(&ch, nclen); err != nil {
		return err
	}
	lens := d.lens[:nlit+ndist]
	for i := 0; i < len(lens); {
		s, err := d.symbol(&ch)
		if err != nil {
			return err
		}
		if s < 16 {
			lens[i] = uint8(s)
			i++
			continue
		}
		rep, val, err := d.repeat(s, lens, i)
		if err != nil {
			return err
		}
		if i+rep > len(lens) {
			return errFlate
		}
		for ; rep > 0; rep-- {
			lens[i] = val
			i++
		}
	}
	if lens[256] == 0 {
		return errFlate
	}
	if err := d.dyn[0].init(lens[:nlit]); err != nil {
		return err
	}
	if err := d.dyn[1].init(lens[nlit:]); err != nil {
		return err
	}
	d.lit, d.dist = &d.dyn[0], &d.dyn[1]
	return nil
}

// codeLengthCode reads the nclen code lengths of the code-length alphabet of
// a dynamic block header and builds its code in ch.
func (d *inflate) codeLengthCode(ch *huffman, nclen int) error {
	var cl [19]uint8
	for i := 0; i < nclen; i++ {
		b, err := d.getBits(3)
		if err != nil {
			return err
		}
		cl[clenOrder[i]] = uint8(b)
	}
	return ch.init(cl[:])
}

// repeat reads the repeat count of code-length symbol s (16, 17 or 18) met at
// lens[i], and returns it with the length it repeats.
func (d *inflate) repeat(s int, lens []uint8, i int) (int, uint8, error) {
	switch s {
	case 16:
		if i == 0 {
			return 0, 0, errFlate
		}
		b, err := d.getBits(2)
		return 3 + int(b), lens[i-1], err
	case 17:
		b, err := d.getBits(3)
		return 3 + int(b), 0, err
	}
	b, err := d.getBits(7)
	return 11 + int(b), 0, err
}

// step decodes until win has no room left (short of the margin) or the stream
// ends.
func (d *inflate) step() error {
	limit := len(d.win) - d.margin
	for d.wpos < limit {
		switch d.state {
		case stDone:
			return nil
		case stHeader:
			if d.onBoundary != nil && d.out > 0 {
				d.onBoundary(d)
			}
			if err := d.header(); err != nil {
				return err
			}
		case stStored:
			if err := d.copyStored(limit); err != nil {
				return err
			}
		case stHuffman:
			if err := d.huffmanBlock(limit); err != nil {
				return err
			}
		}
		if d.state == stHeader && d.final {
			d.state = stDone
		}
	}
	return nil
}

func (d *inflate) copyStored(limit int) error {
	for d.stored > 0 && d.wpos < limit {
		if d.nb == 0 {
			d.bits = 0 // drop bytes refill loaded ahead: they are copied directly
		}
		if d.nb >= 8 {
			d.win[d.wpos] = byte(d.bits)
			d.bits >>= 8
			d.nb -= 8
			d.wpos++
			d.out++
			d.stored--
			continue
		}
		if d.ip == len(d.in) {
			if d.src == nil || d.srcOff+int64(len(d.in)) >= d.srcEnd {
				return io.ErrUnexpectedEOF
			}
			if err := d.fill(); err != nil {
				return err
			}
		}
		n := min(d.stored, limit-d.wpos, len(d.in)-d.ip)
		copy(d.win[d.wpos:], d.in[d.ip:d.ip+n])
		d.ip += n
		d.wpos += n
		d.out += int64(n)
		d.stored -= n
	}
	if d.stored == 0 {
		d.state = stHeader
	}
	return nil
}

// huffmanBlock decodes symbols of a compressed block until the block ends or win
// is full up to limit. It keeps the bit buffer in locals and refills it once per
// symbol pair: 48 bits cover a literal/length code (15), its extra bits (5), a
// distance code (15) and its extra bits (13).
func (d *inflate) huffmanBlock(limit int) (err error) {
	win, in := d.win, d.in
	wpos, ip := d.wpos, d.ip
	bitv, nb := d.bits, d.nb
	lit, dist := d.lit, d.dist
	start := wpos
	defer func() {
		d.wpos, d.ip, d.bits, d.nb = wpos, ip, bitv, nb
		d.out += int64(wpos - start)
	}()
	for wpos < limit {
		if nb < 48 {
			if ip+8 <= len(in) {
				bitv |= binary.LittleEndian.Uint64(in[ip:]) << nb
				k := (63 - nb) >> 3
				ip += int(k)
				nb += k << 3
			} else {
				d.ip, d.bits, d.nb = ip, bitv, nb
				if err := d.refill(); err != nil {
					return err
				}
				in, ip, bitv, nb = d.in, d.ip, d.bits, d.nb
			}
		}
		e := lit.primary[bitv&(1<<primaryBits-1)]
		if e&0x100 != 0 {
			e = lit.sub[int(e>>16)+int((bitv>>primaryBits)&(1<<(e&0xff)-1))]
		}
		l := uint(e & 0xff)
		if l == 0 || l > nb {
			return truncatedOr(l)
		}
		bitv >>= l
		nb -= l
		s := int(e >> 16)
		if s < 256 {
			win[wpos] = byte(s)
			wpos++
			continue
		}
		if s == 256 {
			d.state = stHeader
			return nil
		}
		s -= 257
		if s >= 29 {
			return errFlate
		}
		length := int(lenBase[s])
		if x := uint(lenExtra[s]); x > 0 {
			if x > nb {
				return io.ErrUnexpectedEOF
			}
			length += int(bitv & (1<<x - 1))
			bitv >>= x
			nb -= x
		}
		e = dist.primary[bitv&(1<<primaryBits-1)]
		if e&0x100 != 0 {
			e = dist.sub[int(e>>16)+int((bitv>>primaryBits)&(1<<(e&0xff)-1))]
		}
		l = uint(e & 0xff)
		if l == 0 || l > nb {
			return truncatedOr(l)
		}
		bitv >>= l
		nb -= l
		ds := int(e >> 16)
		if ds >= 30 {
			return errFlate
		}
		dd := int(distBase[ds])
		if x := uint(distExtra[ds]); x > 0 {
			if x > nb {
				return io.ErrUnexpectedEOF
			}
			dd += int(bitv & (1<<x - 1))
			bitv >>= x
			nb -= x
		}
		if dd > wpos || wpos+length > len(win) {
			return errFlate
		}
		from := wpos - dd
		if dd >= length {
			copy(win[wpos:wpos+length], win[from:from+length])
		} else {
			for i := range length {
				win[wpos+i] = win[from+i]
			}
		}
		wpos += length
	}
	return nil
}

// truncatedOr is the error of a code of length l that could not be decoded: no
// such code (l = 0), or not enough input left.
func truncatedOr(l uint) error {
	if l == 0 {
		return errFlate
	}
	return io.ErrUnexpectedEOF
}

// zlibHeader checks a zlib stream's two-byte header: deflate with a window of at
// most 32 KiB (CINFO ≤ 7), a valid check value, no preset dictionary.
func zlibHeader(b0, b1 byte) error {
	if b0&0x0f != 8 || b0>>4 > 7 || (uint16(b0)<<8|uint16(b1))%31 != 0 || b1&0x20 != 0 {
		return errFlate
	}
	return nil
}

// trailer reads the zlib trailer (Adler-32 of the output, big-endian) after the
// final block and checks it when the whole output was summed.
func (d *inflate) trailer() error {
	d.bits >>= d.nb & 7
	d.nb -= d.nb & 7
	v, err := d.getBits(32)
	if err != nil {
		return err
	}
	if d.checkAdler && bits.ReverseBytes32(v) != d.adler {
		return errFlate
	}
	return nil
}

// inflateInto inflates the zlib stream raw into out, which must be exactly the
// output's size, and verifies its checksum.
func inflateInto(out, raw []byte) error {
	if len(raw) < 2 {
		return errFlate
	}
	if err := zlibHeader(raw[0], raw[1]); err != nil {
		return err
	}
	d := inflatePool.Get().(*inflate)
	defer inflatePool.Put(d)
	*d = inflate{in: raw, ip: 2, inputBase: 2, win: out, checkAdler: true, dyn: d.dyn}
	if err := d.step(); err != nil {
		return err
	}
	if d.state == stDone && d.wpos != len(out) {
		return errFlate // the stream ended before filling out
	}
	if d.state != stDone {
		// out is full: the stream may only end here (an empty final block, say).
		d.margin = 0
		var one [1]byte
		d.win, d.wpos = one[:], 0
		if err := d.step(); err != nil || d.wpos != 0 || d.state != stDone {
			return errFlate
		}
	}
	d.adler = adler32.Checksum(out)
	return d.trailer()
}

var inflatePool = sync.Pool{New: func() any { return new(inflate) }}
