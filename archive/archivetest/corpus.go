// Package archivetest generates the hostile-archive corpus package archive is
// tested against: every case is built by code (no binary fixtures), with the
// result Extract must give. Tests of other packages (a CLI, an MCP tool) can run
// the same corpus.
package archivetest

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/capfs/capfs/archive"
)

// Case is one archive and what extracting it into a destination must do.
type Case struct {
	Name string
	Data []byte
	Opts archive.Options
	// Err, if not nil, is the sentinel the error must match (errors.Is): the
	// archive is refused and the destination must be left exactly as it was.
	Err error
	// Extracted lists every path the result must list as extracted (exactly).
	Extracted []string
	// Filtered maps the printable raw name of every filtered entry to its
	// reason (exactly).
	Filtered map[string]archive.Reason
	// Modes gives the mode some extracted paths must have.
	Modes map[string]fs.FileMode
	// Links gives the target some extracted symlinks must have.
	Links map[string]string
}

// Ent is one entry of a generated tar.
type Ent struct {
	Name     string
	Type     byte // tar.TypeReg if 0
	Body     string
	Size     int64 // declared size when Body is empty and Size > 0 (data is zeros)
	Mode     int64
	Linkname string
	PAX      map[string]string
}

// Tar builds an uncompressed tar of ents, as archive/tar writes them.
func Tar(ents ...Ent) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		typ := e.Type
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.Mode
		if mode == 0 {
			mode = 0o644
			if typ == tar.TypeDir {
				mode = 0o755
			}
		}
		h := &tar.Header{Name: e.Name, Typeflag: typ, Mode: mode, Linkname: e.Linkname,
			ModTime: time.Unix(1700000000, 0), PAXRecords: e.PAX}
		if typ == tar.TypeReg {
			h.Size = int64(len(e.Body))
			if e.Body == "" {
				h.Size = e.Size
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			panic(fmt.Sprintf("archivetest: %s: %v", e.Name, err))
		}
		if h.Size > 0 {
			if e.Body != "" {
				tw.Write([]byte(e.Body))
			} else {
				zero := make([]byte, 32<<10)
				for n := h.Size; n > 0; {
					k := min(n, int64(len(zero)))
					tw.Write(zero[:k])
					n -= k
				}
			}
		}
	}
	tw.Close()
	return buf.Bytes()
}

// RawTarHeader returns one 512-byte ustar header block with any typeflag (the
// writer of archive/tar refuses some, such as GNU sparse), followed by size
// bytes of zero data, padded.
func RawTarHeader(name string, typ byte, size int64) []byte {
	b := make([]byte, 512)
	copy(b[0:100], name)
	copy(b[100:108], "0000644\x00")
	copy(b[108:116], "0000000\x00")
	copy(b[116:124], "0000000\x00")
	copy(b[124:136], fmt.Sprintf("%011o\x00", size))
	copy(b[136:148], fmt.Sprintf("%011o\x00", 1700000000))
	b[156] = typ
	if typ == tar.TypeGNUSparse {
		copy(b[257:265], "ustar  \x00") // the GNU magic the old sparse format needs
	} else {
		copy(b[257:263], "ustar\x00")
		copy(b[263:265], "00")
	}
	for i := 148; i < 156; i++ {
		b[i] = ' '
	}
	var sum int64
	for _, c := range b {
		sum += int64(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	data := make([]byte, (size+511)/512*512)
	return append(b, data...)
}

// RawTarEntry returns a ustar header block for name with typeflag typ and
// data as its contents, padded to a block.
func RawTarEntry(name string, typ byte, data []byte) []byte {
	b := RawTarHeader(name, typ, int64(len(data)))
	copy(b[512:], data)
	return b
}

// PAXRecords formats PAX extended-header records ("len key=value\n"), in order.
func PAXRecords(kv [][2]string) string {
	var out strings.Builder
	for _, r := range kv {
		rec := " " + r[0] + "=" + r[1] + "\n"
		n := len(rec) + len(fmt.Sprint(len(rec)))
		if len(fmt.Sprint(n))+len(rec) != n {
			n = len(rec) + len(fmt.Sprint(n))
		}
		out.WriteString(fmt.Sprint(n) + rec)
	}
	return out.String()
}

// TarEnd is the two zero blocks that end a tar.
func TarEnd() []byte { return make([]byte, 1024) }

// Gz compresses b with gzip.
func Gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// Zst compresses b with zstd (with a checksum).
func Zst(b []byte) []byte {
	w, _ := zstd.NewWriter(nil, zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1))
	return w.EncodeAll(b, nil)
}

// ZEnt is one entry of a generated zip.
type ZEnt struct {
	Name  string
	Body  string
	Mode  fs.FileMode // 0: 0644 file
	Store bool
}

// Zip builds a zip with archive/zip.
func Zip(ents ...ZEnt) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range ents {
		h := &zip.FileHeader{Name: e.Name, Method: zip.Deflate, Modified: time.Unix(1700000000, 0)}
		if e.Store {
			h.Method = zip.Store
		}
		m := e.Mode
		if m == 0 {
			m = 0o644
		}
		h.SetMode(m)
		w, err := zw.CreateHeader(h)
		if err != nil {
			panic(err)
		}
		w.Write([]byte(e.Body))
	}
	zw.Close()
	return buf.Bytes()
}

// RawZipEnt is an entry of RawZip: its local header and data are written once
// per distinct Offset index; several central entries may share one.
type RawZipEnt struct {
	Name string
	// Data is stored (or deflated if Deflate) at local record number Local.
	Local int
	// DeclaredSize, if >= 0, replaces the true uncompressed size in both headers.
	DeclaredSize int64
	// BadCRC stores a wrong CRC-32.
	BadCRC bool
	// OtherMethod stores the other method (store for deflate and back) than
	// the local header's.
	OtherMethod bool
	// Flags are the central header's flags (the local header's are 0).
	Flags uint16
}

// RawLocal is one local record of RawZip.
type RawLocal struct {
	Name    string
	Data    []byte
	Deflate bool
	// Zstd compresses Data with zstd (zip method 93) instead.
	Zstd bool
	// ZeroCRC stores a CRC-32 of 0 in both headers (archive/zip then checks
	// none).
	ZeroCRC bool
	// BadLocalCRC stores a wrong CRC-32 in the local header only.
	BadLocalCRC bool
	// LocalSizeLie adds one to the uncompressed size in the local header only.
	LocalSizeLie bool
	// Trailing is stored after the compressed data, counted in the
	// compressed size (bytes the data's decoder never reads).
	Trailing []byte
	// Leading is stored before the compressed data, counted in the
	// compressed size.
	Leading []byte
	// Cut drops that many bytes from the end of the compressed data.
	Cut int
}

// SkippableFrame is a zstd skippable frame holding payload: zstd decoders
// skip it, so it adds nothing to what decompresses.
func SkippableFrame(payload string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0x184d2a50)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

// RawZip writes a zip by hand: the local records in order, then one central
// directory entry per ent, pointing at the local record it names. This makes
// archives archive/zip would never write: central entries sharing data (the
// overlapping zip bomb), sizes that lie, wrong CRCs.
func RawZip(locals []RawLocal, ents []RawZipEnt) []byte {
	var buf bytes.Buffer
	type rec struct {
		off          uint32
		crc          uint32
		csize, usize uint32
		method       uint16
	}
	recs := make([]rec, len(locals))
	le := binary.LittleEndian
	declared := make([]int64, len(locals)) // the size the first ent declares, in the local header too
	for i := range declared {
		declared[i] = -1
	}
	for i := len(ents) - 1; i >= 0; i-- {
		if ents[i].DeclaredSize >= 0 {
			declared[ents[i].Local] = ents[i].DeclaredSize
		}
	}
	for i, l := range locals {
		data := l.Data
		method := uint16(0)
		if l.Deflate {
			var c bytes.Buffer
			fw, _ := flate.NewWriter(&c, flate.BestCompression)
			fw.Write(l.Data)
			fw.Close()
			data = c.Bytes()
			method = 8
		}
		if l.Zstd {
			data, method = Zst(l.Data), 93
		}
		data = append(slices.Clip(data[:len(data)-l.Cut]), l.Trailing...)
		data = append(slices.Clip(l.Leading), data...)
		r := rec{off: uint32(buf.Len()), crc: crc32.ChecksumIEEE(l.Data), csize: uint32(len(data)), usize: uint32(len(l.Data)), method: method}
		if l.ZeroCRC {
			r.crc = 0
		}
		recs[i] = r
		h := make([]byte, 30)
		le.PutUint32(h[0:], 0x04034b50)
		le.PutUint16(h[4:], 20)
		le.PutUint16(h[8:], method)
		le.PutUint32(h[14:], r.crc)
		le.PutUint32(h[18:], r.csize)
		le.PutUint32(h[22:], r.usize)
		if l.BadLocalCRC {
			le.PutUint32(h[14:], r.crc^0xdeadbeef)
		}
		if declared[i] >= 0 {
			le.PutUint32(h[22:], uint32(declared[i]))
		}
		if l.LocalSizeLie {
			le.PutUint32(h[22:], r.usize+1)
		}
		le.PutUint16(h[26:], uint16(len(l.Name)))
		buf.Write(h)
		buf.WriteString(l.Name)
		buf.Write(data)
	}
	cdStart := buf.Len()
	for _, e := range ents {
		r := recs[e.Local]
		usize := r.usize
		if e.DeclaredSize >= 0 {
			usize = uint32(e.DeclaredSize)
		}
		crc := r.crc
		if e.BadCRC {
			crc ^= 0xdeadbeef
		}
		h := make([]byte, 46)
		le.PutUint32(h[0:], 0x02014b50)
		le.PutUint16(h[4:], 20|3<<8) // made by Unix
		le.PutUint16(h[6:], 20)
		le.PutUint16(h[8:], e.Flags)
		method := r.method
		if e.OtherMethod {
			method = 8 - method
		}
		le.PutUint16(h[10:], method)
		le.PutUint32(h[16:], crc)
		le.PutUint32(h[20:], r.csize)
		le.PutUint32(h[24:], usize)
		le.PutUint16(h[28:], uint16(len(e.Name)))
		le.PutUint32(h[38:], 0o100644<<16)
		le.PutUint32(h[42:], r.off)
		buf.Write(h)
		buf.WriteString(e.Name)
	}
	cdLen := buf.Len() - cdStart
	end := make([]byte, 22)
	le.PutUint32(end[0:], 0x06054b50)
	le.PutUint16(end[8:], uint16(len(ents)))
	le.PutUint16(end[10:], uint16(len(ents)))
	le.PutUint32(end[12:], uint32(cdLen))
	le.PutUint32(end[16:], uint32(cdStart))
	buf.Write(end)
	return buf.Bytes()
}

func reasons(kv ...string) map[string]archive.Reason {
	m := map[string]archive.Reason{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = archive.Reason(kv[i+1])
	}
	return m
}

var links = archive.Options{Links: archive.LinksInside}

// Corpus returns every case. Sizes are kept small (limits are lowered where a
// case needs to exceed them) except where the default limit itself is the
// point. The cases are built once per process; callers must not modify their
// Data.
func Corpus() []Case { return slices.Clone(corpus()) }

var corpus = sync.OnceValue(build)

func build() []Case {
	var cs []Case
	add := func(c Case) { cs = append(cs, c) }

	ok := Tar(Ent{Name: "dir/", Type: tar.TypeDir}, Ent{Name: "dir/a.txt", Body: "alpha"}, Ent{Name: "b.txt", Body: "beta"})
	add(Case{Name: "plain tar", Data: ok, Extracted: []string{"dir", "dir/a.txt", "b.txt"}, Filtered: reasons()})
	add(Case{Name: "plain tar.gz", Data: Gz(ok), Extracted: []string{"dir", "dir/a.txt", "b.txt"}, Filtered: reasons()})
	add(Case{Name: "plain tar.zst", Data: Zst(ok), Extracted: []string{"dir", "dir/a.txt", "b.txt"}, Filtered: reasons()})
	add(Case{Name: "plain zip", Data: Zip(ZEnt{Name: "dir/", Mode: fs.ModeDir | 0o755}, ZEnt{Name: "dir/a.txt", Body: "alpha"}, ZEnt{Name: "b.txt", Body: "beta", Store: true}),
		Extracted: []string{"dir", "dir/a.txt", "b.txt"}, Filtered: reasons()})

	// Zip slip and friends: names that leave, or pretend to.
	add(Case{Name: "zip slip", Data: Zip(ZEnt{Name: "../../evil.txt", Body: "x"}, ZEnt{Name: "ok.txt", Body: "y"}),
		Extracted: []string{"ok.txt"}, Filtered: reasons("../../evil.txt", "traversal")})
	add(Case{Name: "tar slip inside-looking", Data: Tar(Ent{Name: "a/../../evil", Body: "x"}, Ent{Name: "a/../b", Body: "y"}),
		Extracted: []string{}, Filtered: reasons("a/../../evil", "traversal", "a/../b", "traversal")})
	add(Case{Name: "absolute and drive", Data: Tar(Ent{Name: "/etc/passwd", Body: "x"}, Ent{Name: "C:/win.ini", Body: "x"}, Ent{Name: "c:rel", Body: "x"}, Ent{Name: "//host/share/x", Body: "x"}),
		Extracted: []string{}, Filtered: reasons("/etc/passwd", "absolute", "C:/win.ini", "drive", "c:rel", "drive", "//host/share/x", "drive")})
	add(Case{Name: "backslash", Data: Zip(ZEnt{Name: `..\..\evil.txt`, Body: "x"}),
		Extracted: []string{}, Filtered: reasons(`..\..\evil.txt`, "backslash")})
	add(Case{Name: "control characters", Data: Tar(Ent{Name: "esc\x1b[31m", Body: "x"}, Ent{Name: "c1\u0085", Body: "x"}, Ent{Name: "del\x7f", Body: "x"}),
		Extracted: []string{}, Filtered: reasons(`esc\x1b[31m`, "control-character", `c1\xc2\x85`, "control-character", `del\x7f`, "control-character")})
	add(Case{Name: "NUL in a zip name", Data: Zip(ZEnt{Name: "a\x00b", Body: "x"}, ZEnt{Name: "ok\n", Body: "x"}),
		Extracted: []string{}, Filtered: reasons(`a\x00b`, "control-character", `ok\x0a`, "control-character")})
	add(Case{Name: "invalid utf-8", Data: Tar(Ent{Name: "bad\xff", Body: "x"}),
		Extracted: []string{}, Filtered: reasons(`bad\xff`, "encoding")})
	long := strings.Repeat("n", 256)
	add(Case{Name: "long component", Data: Tar(Ent{Name: long, Body: "x"}, Ent{Name: strings.Repeat("n", 255), Body: "ok"}),
		Extracted: []string{strings.Repeat("n", 255)}, Filtered: reasons(long, "long-name")})
	deep := strings.Repeat("d/", 300) + "f"
	add(Case{Name: "deep path", Data: Tar(Ent{Name: deep, Body: "x"}),
		Extracted: []string{}, Filtered: reasons(deep[:512]+"...", "depth")})
	add(Case{Name: "the destination itself", Data: Tar(Ent{Name: "./", Type: tar.TypeDir}, Ent{Name: "./f", Body: "x"}, Ent{Name: ".", Body: "file named dot"}),
		Extracted: []string{"f"}, Filtered: reasons(".", "empty-name")})
	add(Case{Name: "dot components cleaned", Data: Tar(Ent{Name: "./x//y/./z.txt", Body: "x"}),
		Extracted: []string{"x/y/z.txt"}, Filtered: reasons()})

	// Links.
	add(Case{Name: "symlink refused by default", Data: Tar(Ent{Name: "l", Type: tar.TypeSymlink, Linkname: "target"}),
		Extracted: []string{}, Filtered: reasons("l", "symlink")})
	add(Case{Name: "symlink then write-through", Opts: links,
		Data: Tar(Ent{Name: "esc", Type: tar.TypeSymlink, Linkname: "../outside"}, Ent{Name: "in", Type: tar.TypeSymlink, Linkname: "sub"},
			Ent{Name: "sub/", Type: tar.TypeDir}, Ent{Name: "in/pwned", Body: "x"}, Ent{Name: "esc/pwned", Body: "y"}),
		Extracted: []string{"in", "sub"},
		Filtered:  reasons("in/pwned", "through-link", "esc/pwned", "through-link", "esc", "link-target"),
		Links:     map[string]string{"in": "sub"}})
	add(Case{Name: "symlink chain climbing out", Opts: links,
		Data:      Tar(Ent{Name: "a/b/x", Type: tar.TypeSymlink, Linkname: "../.."}, Ent{Name: "a/b/l", Type: tar.TypeSymlink, Linkname: "x/../../.."}),
		Extracted: []string{"a/b/x"}, Filtered: reasons("a/b/l", "link-target")})
	add(Case{Name: "absolute symlink", Opts: links, Data: Tar(Ent{Name: "l", Type: tar.TypeSymlink, Linkname: "/etc/passwd"}),
		Extracted: []string{}, Filtered: reasons("l", "link-target")})
	add(Case{Name: "hard link escape", Data: Tar(Ent{Name: "h", Type: tar.TypeLink, Linkname: "../../etc/passwd"}),
		Extracted: []string{}, Filtered: reasons("h", "hardlink")})
	add(Case{Name: "hard link escape allowed links", Opts: links,
		Data:      Tar(Ent{Name: "f", Body: "data"}, Ent{Name: "h", Type: tar.TypeLink, Linkname: "../../etc/passwd"}, Ent{Name: "h2", Type: tar.TypeLink, Linkname: "f"}, Ent{Name: "h3", Type: tar.TypeLink, Linkname: "later"}, Ent{Name: "later", Body: "z"}),
		Extracted: []string{"f", "h2", "later"}, Filtered: reasons("h", "link-target", "h3", "link-target")})
	add(Case{Name: "zip symlink", Opts: links,
		Data:      Zip(ZEnt{Name: "t.txt", Body: "t"}, ZEnt{Name: "l", Body: "t.txt", Mode: fs.ModeSymlink | 0o777}, ZEnt{Name: "bad", Body: "../../x", Mode: fs.ModeSymlink | 0o777}),
		Extracted: []string{"t.txt", "l"}, Filtered: reasons("bad", "link-target"), Links: map[string]string{"l": "t.txt"}})

	// Special files.
	add(Case{Name: "devices and fifo", Data: Tar(Ent{Name: "null", Type: tar.TypeChar}, Ent{Name: "sda", Type: tar.TypeBlock}, Ent{Name: "p", Type: tar.TypeFifo}),
		Extracted: []string{}, Filtered: reasons("null", "device", "sda", "device", "p", "device")})
	sparse := append(RawTarHeader("sp", tar.TypeGNUSparse, 0), TarEnd()...)
	add(Case{Name: "gnu sparse", Data: sparse, Extracted: []string{}, Filtered: reasons("sp", "sparse")})
	spMap := "1\n0\n5\n" + strings.Repeat("\x00", 512-len("1\n0\n5\n"))
	pax := PAXRecords([][2]string{{"GNU.sparse.major", "1"}, {"GNU.sparse.minor", "0"}, {"GNU.sparse.name", "sparse.bin"}, {"GNU.sparse.realsize", "10"}})
	paxSparse := append(RawTarEntry("PaxHeaders/x", tar.TypeXHeader, []byte(pax)), RawTarEntry("GNUSparseFile.0/sparse.bin", tar.TypeReg, []byte(spMap+"hello"))...)
	paxSparse = append(paxSparse, RawTarEntry("ok", tar.TypeReg, []byte("ok"))...)
	add(Case{Name: "pax sparse 1.0", Data: append(paxSparse, TarEnd()...),
		Extracted: []string{"ok"}, Filtered: reasons("sparse.bin", "sparse")})
	add(Case{Name: "setuid stripped", Data: Tar(Ent{Name: "suid", Body: "#!/bin/sh\n", Mode: 0o4755}, Ent{Name: "sgid", Body: "x", Mode: 0o2777}, Ent{Name: "sticky/", Type: tar.TypeDir, Mode: 0o1777}, Ent{Name: "priv", Body: "p", Mode: 0o600}),
		Extracted: []string{"suid", "sgid", "sticky", "priv"}, Filtered: reasons(),
		Modes: map[string]fs.FileMode{"suid": 0o755, "sgid": 0o755, "sticky": fs.ModeDir | 0o755, "priv": 0o600}})

	// Collisions.
	add(Case{Name: "case collision", Data: Tar(Ent{Name: "README", Body: "1"}, Ent{Name: "readme", Body: "2"}),
		Extracted: []string{"README"}, Filtered: reasons("readme", "collision")})
	add(Case{Name: "case collision in a prefix", Data: Tar(Ent{Name: "Dir/a", Body: "1"}, Ent{Name: "dir/b", Body: "2"}),
		Extracted: []string{"Dir/a"}, Filtered: reasons("dir/b", "collision")})
	add(Case{Name: "nfc nfd collision", Data: Tar(Ent{Name: "caf\u00e9", Body: "1"}, Ent{Name: "cafe\u0301", Body: "2"}),
		Extracted: []string{"caf\u00e9"}, Filtered: reasons("cafe\u0301", "collision")})
	add(Case{Name: "full case folding", Data: Tar(Ent{Name: "STRASSE", Body: "1"}, Ent{Name: "stra\u00dfe", Body: "2"}),
		Extracted: []string{"STRASSE"}, Filtered: reasons("stra\u00dfe", "collision")})
	add(Case{Name: "duplicate name", Data: Tar(Ent{Name: "a", Body: "1"}, Ent{Name: "a", Body: "2"}, Ent{Name: "d/", Type: tar.TypeDir}, Ent{Name: "d/", Type: tar.TypeDir}),
		Extracted: []string{"a", "d"}, Filtered: reasons("a", "collision")})
	add(Case{Name: "file then beneath it", Data: Tar(Ent{Name: "f", Body: "1"}, Ent{Name: "f/g", Body: "2"}),
		Extracted: []string{"f"}, Filtered: reasons("f/g", "through-link")})

	// The destination (see the test harness: it holds existing.txt).
	add(Case{Name: "existing file kept", Data: Tar(Ent{Name: "existing.txt", Body: "new"}),
		Extracted: []string{}, Filtered: reasons("existing.txt", "exists")})
	add(Case{Name: "existing file overwritten", Opts: archive.Options{Overwrite: true}, Data: Tar(Ent{Name: "existing.txt", Body: "new"}),
		Extracted: []string{"existing.txt"}, Filtered: reasons()})
	add(Case{Name: "strict refuses", Opts: archive.Options{Strict: true}, Data: Tar(Ent{Name: "ok", Body: "1"}, Ent{Name: "../bad", Body: "2"}),
		Err: archive.ErrRefused})

	// Bombs and limits.
	add(Case{Name: "zip ratio bomb", Opts: archive.Options{Limits: archive.Limits{MaxExtractedBytes: 1 << 20}},
		Data: RawZip([]RawLocal{{Name: "z", Data: make([]byte, 4<<20), Deflate: true}}, []RawZipEnt{{Name: "z", DeclaredSize: -1}}),
		Err:  archive.ErrLimit})
	add(Case{Name: "zip declared size over entry limit", Data: RawZip([]RawLocal{{Name: "z", Data: []byte("x")}}, []RawZipEnt{{Name: "z", DeclaredSize: 300 << 20}}),
		Err: archive.ErrLimit})
	add(Case{Name: "zip size that lies low", Data: RawZip([]RawLocal{{Name: "z", Data: make([]byte, 1<<16), Deflate: true}}, []RawZipEnt{{Name: "z", DeclaredSize: 10}}),
		Err: archive.ErrCorrupt})
	add(Case{Name: "overlapping zip entries", Data: RawZip([]RawLocal{{Name: "a", Data: make([]byte, 1<<10), Deflate: true}},
		[]RawZipEnt{{Name: "a", DeclaredSize: -1}, {Name: "b", DeclaredSize: -1}, {Name: "c", DeclaredSize: -1}}),
		Err: archive.ErrOverlap})
	add(Case{Name: "zip crc broken", Data: RawZip([]RawLocal{{Name: "a", Data: []byte("hello")}}, []RawZipEnt{{Name: "a", DeclaredSize: -1, BadCRC: true}}),
		Err: archive.ErrCorrupt})
	// Checksums and sizes, stored and deflated, and the local header against
	// the central directory (two readers must not disagree on what a zip holds).
	hello := []byte("hello, world")
	one := func(l RawLocal, e RawZipEnt) []byte {
		l.Data, e.DeclaredSize = hello, -1
		if l.Name == "" {
			l.Name = "a"
		}
		if e.Name == "" {
			e.Name = "a"
		}
		return RawZip([]RawLocal{l}, []RawZipEnt{e})
	}
	add(Case{Name: "zip stored crc broken", Data: one(RawLocal{}, RawZipEnt{BadCRC: true}), Err: archive.ErrCorrupt})
	add(Case{Name: "zip deflated crc broken", Data: one(RawLocal{Deflate: true}, RawZipEnt{BadCRC: true}), Err: archive.ErrCorrupt})
	add(Case{Name: "zip stored crc zero", Data: one(RawLocal{ZeroCRC: true}, RawZipEnt{}), Err: archive.ErrCorrupt})
	add(Case{Name: "zip deflated crc zero", Data: one(RawLocal{ZeroCRC: true, Deflate: true}, RawZipEnt{}), Err: archive.ErrCorrupt})
	add(Case{Name: "zip local name differs", Data: one(RawLocal{Name: "innocent.txt"}, RawZipEnt{Name: "evil.txt"}), Err: archive.ErrCorrupt})
	add(Case{Name: "zip local method differs", Data: one(RawLocal{Deflate: true}, RawZipEnt{OtherMethod: true}), Err: archive.ErrCorrupt})
	add(Case{Name: "zip local crc differs", Data: one(RawLocal{BadLocalCRC: true}, RawZipEnt{}), Err: archive.ErrCorrupt})
	add(Case{Name: "zip local size differs", Data: one(RawLocal{LocalSizeLie: true}, RawZipEnt{}), Err: archive.ErrCorrupt})
	add(Case{Name: "zip flags differ", Data: one(RawLocal{}, RawZipEnt{Flags: 0x800}), Err: archive.ErrCorrupt})
	add(Case{Name: "zip deflated with trailing bytes", Data: one(RawLocal{Deflate: true, Trailing: []byte("hidden")}, RawZipEnt{}), Err: archive.ErrCorrupt})
	add(Case{Name: "zip stored and valid", Data: one(RawLocal{}, RawZipEnt{}), Extracted: []string{"a"}, Filtered: reasons()})
	// Zstandard entries are checked as deflated ones: CRC-32, both sizes, and
	// compressed data that is exactly zstd frames filling the compressed size.
	add(Case{Name: "zip zstd and valid", Data: one(RawLocal{Zstd: true}, RawZipEnt{}), Extracted: []string{"a"}, Filtered: reasons()})
	add(Case{Name: "zip zstd crc broken", Data: one(RawLocal{Zstd: true}, RawZipEnt{BadCRC: true}), Err: archive.ErrCorrupt})
	add(Case{Name: "zip zstd crc zero", Data: one(RawLocal{Zstd: true, ZeroCRC: true}, RawZipEnt{}), Err: archive.ErrCorrupt})
	add(Case{Name: "zip zstd local size differs", Data: one(RawLocal{Zstd: true, LocalSizeLie: true}, RawZipEnt{}), Err: archive.ErrCorrupt})
	add(Case{Name: "zip zstd size that lies low", Data: RawZip([]RawLocal{{Name: "z", Data: make([]byte, 1<<16), Zstd: true}}, []RawZipEnt{{Name: "z", DeclaredSize: 10}}),
		Err: archive.ErrCorrupt})
	add(Case{Name: "zip zstd size that lies high", Data: RawZip([]RawLocal{{Name: "z", Data: make([]byte, 1<<10), Zstd: true}}, []RawZipEnt{{Name: "z", DeclaredSize: 1 << 11}}),
		Err: archive.ErrCorrupt})
	add(Case{Name: "zip zstd with trailing bytes", Data: one(RawLocal{Zstd: true, Trailing: []byte("hidden")}, RawZipEnt{}), Err: archive.ErrCorrupt})
	add(Case{Name: "zip zstd with a trailing byte", Data: one(RawLocal{Zstd: true, Trailing: []byte{0}}, RawZipEnt{}), Err: archive.ErrCorrupt})
	add(Case{Name: "zip zstd with a skippable frame after", Data: one(RawLocal{Zstd: true, Trailing: SkippableFrame("hidden")}, RawZipEnt{}), Err: archive.ErrCorrupt})
	add(Case{Name: "zip zstd with a skippable frame before", Data: one(RawLocal{Zstd: true, Leading: SkippableFrame("hidden")}, RawZipEnt{}), Err: archive.ErrCorrupt})
	add(Case{Name: "zip zstd truncated", Data: one(RawLocal{Zstd: true, Cut: 3}, RawZipEnt{}), Err: archive.ErrCorrupt})
	add(Case{Name: "zip zstd empty file, no bytes", Data: RawZip([]RawLocal{{Name: "e", Zstd: true, Cut: len(Zst(nil))}}, []RawZipEnt{{Name: "e", DeclaredSize: -1}}),
		Extracted: []string{"e"}, Filtered: reasons()})
	desc := Zip(ZEnt{Name: "a", Body: "hello, world"}) // archive/zip writes a data descriptor
	if i := bytes.Index(desc, []byte("PK\x07\x08")); i >= 0 {
		desc = bytes.Clone(desc)
		desc[i+12]++ // its uncompressed size
	}
	add(Case{Name: "zip data descriptor size differs", Data: desc, Err: archive.ErrCorrupt})
	prefixed := append([]byte("#!/bin/sh\nexit 0\n"), Zip(ZEnt{Name: "p.txt", Body: "prefixed"}, ZEnt{Name: "s.txt", Body: "stored", Store: true})...)
	add(Case{Name: "zip after a prefix", Opts: archive.Options{Format: archive.FormatZip}, Data: prefixed,
		Extracted: []string{"p.txt", "s.txt"}, Filtered: reasons()})
	add(Case{Name: "zip deflated and valid", Data: one(RawLocal{Deflate: true}, RawZipEnt{}), Extracted: []string{"a"}, Filtered: reasons()})
	add(Case{Name: "tar.gz ratio bomb", Opts: archive.Options{Limits: archive.Limits{MaxExtractedBytes: 1 << 20}},
		Data: Gz(Tar(Ent{Name: "a", Size: 600 << 10}, Ent{Name: "b", Size: 600 << 10})), Err: archive.ErrLimit})
	add(Case{Name: "tar stream over archive limit", Opts: archive.Options{Limits: archive.Limits{MaxArchiveBytes: 64 << 10}},
		Data: Zst(Tar(Ent{Name: "a", Size: 100 << 10})), Err: archive.ErrLimit})
	add(Case{Name: "entry over entry limit", Opts: archive.Options{Limits: archive.Limits{MaxEntryBytes: 1000}},
		Data: Tar(Ent{Name: "a", Size: 1001}), Err: archive.ErrLimit})
	many := make([]Ent, archive.DefaultMaxEntries+1)
	for i := range many {
		many[i] = Ent{Name: fmt.Sprintf("f%06d", i), Body: ""}
	}
	add(Case{Name: "huge entry count", Data: Gz(Tar(many...)), Err: archive.ErrLimit})

	// Broken archives.
	full := Gz(Tar(Ent{Name: "a", Body: strings.Repeat("data ", 1000)}, Ent{Name: "b", Body: "b"}))
	add(Case{Name: "truncated tar.gz", Data: full[:len(full)/2], Err: archive.ErrCorrupt})
	tz := Zst(Tar(Ent{Name: "a", Body: strings.Repeat("data ", 1000)}))
	broken := bytes.Clone(tz)
	broken[len(broken)-2] ^= 0xff // the XXH64 checksum
	add(Case{Name: "zstd checksum broken", Data: broken, Err: archive.ErrCorrupt})
	gzb := bytes.Clone(full)
	gzb[len(gzb)-6] ^= 0xff // the gzip CRC-32
	add(Case{Name: "gzip crc broken", Data: gzb, Err: archive.ErrCorrupt})
	tb := Tar(Ent{Name: "a", Body: strings.Repeat("x", 5000)})
	add(Case{Name: "truncated tar", Data: tb[:3000], Err: archive.ErrCorrupt})
	tc := bytes.Clone(tb)
	tc[0] = 'b' // the name, under an unchanged header checksum
	add(Case{Name: "tar header checksum broken", Data: tc, Err: archive.ErrCorrupt})
	zb := Zip(ZEnt{Name: "a", Body: "hello"})
	add(Case{Name: "truncated zip", Data: zb[:len(zb)-10], Err: archive.ErrCorrupt})
	add(Case{Name: "not an archive", Data: []byte("just some text, not an archive at all"), Err: archive.ErrFormat})
	return cs
}
