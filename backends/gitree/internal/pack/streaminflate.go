package pack

import (
	"errors"
	"hash"
	"hash/adler32"
	"hash/crc32"
	"io"
)

// streamInflate reads a zlib stream of known output size from src[start:end]
// through a sliding window, recording checkpoints.
type streamInflate struct {
	d          inflate
	src        io.ReaderAt
	start, end int64 // the zlib stream in src
	size       int64 // the output's size
	h          hash.Hash32

	// With crcCheck, a pass from the start to the end also checks that the
	// CRC-32 of crcHead (the pack entry's header) and of src[start:end] is
	// crcWant, the entry's index CRC.
	crcCheck bool
	crcHead  []byte
	crcWant  uint32
}

// errStreamCRC reports a streamed entry whose bytes do not match its index CRC.
var errStreamCRC = errors.New("entry does not match its index CRC")

// streamChunk is how much output one step produces at most, beyond the window.
const streamChunk = 256 << 10

// reset positions s at checkpoint c (nil: the stream's start).
func (s *streamInflate) reset(c *checkpoint) error {
	// Buffers: a window of 32 KiB of history plus a chunk of output, and 64 KiB of
	// input, each no larger than a small stream needs.
	winSize := int(min(windowSize+streamChunk, s.size+maxMatch+1))
	win := s.d.win
	if cap(win) < winSize {
		win = make([]byte, winSize)
	}
	inSize := int(max(min(64<<10, s.end-s.start), 1))
	in := s.d.in
	if cap(in) < inSize {
		in = make([]byte, 0, inSize)
	}
	dyn := s.d.dyn
	s.d = inflate{src: s.src, srcEnd: s.end, in: in[:0], win: win[:cap(win)], margin: maxMatch, dyn: dyn, inputBase: s.start + 2}
	if c == nil {
		var h [2]byte
		if _, err := s.src.ReadAt(h[:], s.start); err != nil {
			return err
		}
		if err := zlibHeader(h[0], h[1]); err != nil {
			return err
		}
		s.d.srcOff = s.start + 2
		s.d.checkAdler = true
		if s.crcCheck {
			s.d.crcOn = true
			s.d.crc = crc32.Update(crc32.ChecksumIEEE(s.crcHead), crc32.IEEETable, h[:])
		}
		s.h = adler32.New()
		return nil
	}
	byteOff := s.start + 2 + c.bit/8
	s.d.srcOff = byteOff
	s.d.wpos = copy(s.d.win, c.window)
	s.d.rpos, s.d.adlerPos = s.d.wpos, s.d.wpos
	s.d.out = c.out
	s.h = nil
	if sh := uint(c.bit % 8); sh > 0 {
		if _, err := s.d.getBits(sh); err != nil {
			return err
		}
	}
	return nil
}

// pos returns the stream offset of the next byte Read returns.
func (s *streamInflate) pos() int64 { return s.d.out - int64(s.d.wpos-s.d.rpos) }

// more decodes the next piece of output, sliding the window first when the buffer
// is full. It returns io.EOF at the stream's end, once the trailer checks out.
func (s *streamInflate) more() error {
	d := &s.d
	if d.state == stDone {
		if d.rpos == d.wpos {
			return io.EOF
		}
		return nil
	}
	if d.wpos >= len(d.win)-d.margin {
		s.sum()
		keep := min(d.wpos, windowSize)
		copy(d.win, d.win[d.wpos-keep:d.wpos])
		d.rpos -= d.wpos - keep
		d.adlerPos -= d.wpos - keep
		d.wpos = keep
	}
	if err := d.step(); err != nil {
		return err
	}
	if d.out > s.size {
		return errFlate
	}
	if d.state == stDone {
		if d.out != s.size {
			return errFlate
		}
		s.sum()
		if s.h != nil {
			d.adler = s.h.Sum32()
		}
		if err := d.trailer(); err != nil {
			return err
		}
		if d.crcOn {
			// The CRC covers the entry to its end: read what the decoder left.
			for d.srcOff+int64(len(d.in)) < d.srcEnd {
				if err := d.fill(); err != nil {
					return err
				}
			}
			if d.crc != s.crcWant {
				return errStreamCRC
			}
		}
	}
	return nil
}

// sum adds the output not yet summed to the running checksum.
func (s *streamInflate) sum() {
	d := &s.d
	if s.h != nil && d.adlerPos < d.wpos {
		s.h.Write(d.win[d.adlerPos:d.wpos])
	}
	d.adlerPos = d.wpos
}

// read copies decoded output into p.
func (s *streamInflate) read(p []byte) (int, error) {
	d := &s.d
	for d.rpos == d.wpos {
		if err := s.more(); err != nil {
			return 0, err
		}
	}
	n := copy(p, d.win[d.rpos:d.wpos])
	d.rpos += n
	return n, nil
}

// skip discards n bytes of output.
func (s *streamInflate) skip(n int64) error {
	d := &s.d
	for n > 0 {
		if d.rpos == d.wpos {
			if err := s.more(); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
			continue
		}
		k := min(n, int64(d.wpos-d.rpos))
		d.rpos += int(k)
		n -= k
	}
	return nil
}

// snapshot returns a checkpoint at the decoder's current position, which must be
// a block boundary.
func (d *inflate) snapshot() checkpoint {
	keep := min(d.wpos, windowSize)
	return checkpoint{bit: d.bitPos(), out: d.out, window: append([]byte(nil), d.win[d.wpos-keep:d.wpos]...)}
}
