package cas

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// statRecord is one stat cache entry.
type statRecord struct {
	Size, Mtime, Ctime int64
	Dev, Ino           uint64
	Exec               bool
	Hash               [sha256.Size]byte
}

// statCache is a snapshot's view of its stat cache file: the records read
// (old, indexing recs), which of them this snapshot found still true (seen:
// kept without copying), and the records it adds or replaces.
type statCache struct {
	path  string
	start time.Time // the snapshot's start, for the racily-clean rule
	old   map[string]int
	recs  []statRecord
	seen  []bool // seen[i]: recs[i] is kept; each index written by one goroutine
	mu    sync.Mutex
	added map[string]statRecord
}

func (s *Store) loadStatCache(name string) *statCache {
	if name == "" {
		return nil
	}
	h := sha256.Sum256([]byte(name))
	c := &statCache{path: filepath.Join(s.dir, "statcache", hex.EncodeToString(h[:16])), start: time.Now(), old: map[string]int{}, added: map[string]statRecord{}}
	if b, err := os.ReadFile(c.path); err == nil {
		if m, recs, ok := decodeStatCache(b); ok {
			c.old, c.recs = m, recs
		}
	}
	c.seen = make([]bool, len(c.recs))
	return c
}

// The stat cache file: statMagic, then per record uvarint(len(path)), path, and
// the record's fixed fields (little-endian size, mtime, ctime, dev, ino, one
// byte exec, 32 bytes hash), then the CRC-32C (Castagnoli) of everything
// before it, little-endian. A file that does not check (torn by a crash) is
// ignored: the snapshot reads every file. The checksum guards against tearing,
// not tampering: the store's directory is trusted like its blobs' names.
const statMagic = "capfs-statcache-2\n"

var crcTable = crc32.MakeTable(crc32.Castagnoli)

const statFixed = 8*5 + 1 + sha256.Size

func encodeStatCache(m map[string]statRecord) []byte {
	b := make([]byte, 0, len(statMagic)+len(m)*(statFixed+48)+4)
	b = append(b, statMagic...)
	for p, r := range m {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
		b = binary.LittleEndian.AppendUint64(b, uint64(r.Size))
		b = binary.LittleEndian.AppendUint64(b, uint64(r.Mtime))
		b = binary.LittleEndian.AppendUint64(b, uint64(r.Ctime))
		b = binary.LittleEndian.AppendUint64(b, r.Dev)
		b = binary.LittleEndian.AppendUint64(b, r.Ino)
		if r.Exec {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = append(b, r.Hash[:]...)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

func decodeStatCache(b []byte) (map[string]int, []statRecord, bool) {
	if len(b) < len(statMagic)+4 || string(b[:len(statMagic)]) != statMagic {
		return nil, nil, false
	}
	body, sum := b[:len(b)-4], b[len(b)-4:]
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(sum) {
		return nil, nil, false
	}
	// The paths are substrings of one copy of the body: one allocation, not
	// one per record.
	text := string(body)
	// Every record is at least statFixed+1 bytes: size the map and slice once.
	est := (len(body) - len(statMagic)) / (statFixed + 24)
	m := make(map[string]int, est)
	recs := make([]statRecord, 0, est)
	for rest := body[len(statMagic):]; len(rest) > 0; {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) || uint64(len(rest)-k)-n < statFixed {
			return nil, nil, false
		}
		at := len(body) - len(rest) + k
		p := text[at : at+int(n)]
		f := rest[k+int(n):]
		r := statRecord{
			Size: int64(binary.LittleEndian.Uint64(f[0:])), Mtime: int64(binary.LittleEndian.Uint64(f[8:])),
			Ctime: int64(binary.LittleEndian.Uint64(f[16:])), Dev: binary.LittleEndian.Uint64(f[24:]),
			Ino: binary.LittleEndian.Uint64(f[32:]), Exec: f[40] != 0,
		}
		copy(r.Hash[:], f[41:statFixed])
		if i, ok := m[p]; ok {
			recs[i] = r
		} else {
			m[p] = len(recs)
			recs = append(recs, r)
		}
		rest = f[statFixed:]
	}
	return m, recs, true
}

func (c *statCache) save() error {
	// Nothing changed (every record kept, none added): leave the file as it is.
	if len(c.added) == 0 && !slices.Contains(c.seen, false) {
		return nil
	}
	next := make(map[string]statRecord, len(c.recs)+len(c.added))
	for p, i := range c.old {
		if c.seen[i] {
			next[p] = c.recs[i]
		}
	}
	maps.Copy(next, c.added)
	// Not synced: a file a crash tore fails its checksum and is ignored.
	f, err := os.CreateTemp(filepath.Dir(c.path), ".tmp-")
	if err != nil {
		return err
	}
	_, err = f.Write(encodeStatCache(next))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), c.path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// racy reports whether status e is too recent to trust next time: a file
// modified within a second of the snapshot's start could change again without
// its mtime moving (git's "racily clean" entries).
func (c *statCache) racy(e snapEntry) bool {
	limit := c.start.Add(-time.Second).UnixNano()
	return e.mtime >= limit || e.ctime >= limit
}

func (c *statCache) record(rel string, e snapEntry, d Digest) {
	if c == nil || c.racy(e) {
		return
	}
	c.mu.Lock()
	c.added[rel] = statRecord{Size: e.size, Mtime: e.mtime, Ctime: e.ctime, Dev: e.dev, Ino: e.ino, Exec: e.mode&0o100 != 0, Hash: d.Hash}
	c.mu.Unlock()
}

// lookup returns the digest the cache records for file rel if its status e
// matches the record, which is then kept.
func (c *statCache) lookup(rel string, e snapEntry) (Digest, bool) {
	if c == nil {
		return Digest{}, false
	}
	i, ok := c.old[rel]
	if !ok {
		return Digest{}, false
	}
	r := &c.recs[i]
	if r.Size != e.size || r.Mtime != e.mtime || r.Ctime != e.ctime || r.Dev != e.dev || r.Ino != e.ino || r.Exec != (e.mode&0o100 != 0) {
		return Digest{}, false
	}
	c.seen[i] = true
	return Digest{Hash: r.Hash, Size: r.Size}, true
}

// dirKey is the stat cache key of directory rel's record: NUL cannot appear
// in a path, so it collides with no file's.
func dirKey(rel string) string { return "\x00" + rel }

// unchangedDir returns the digest recorded for directory rel if its record
// holds status self, and keeps the record.
func (c *statCache) unchangedDir(rel string, self snapEntry) (Digest, bool) {
	if c == nil {
		return Digest{}, false
	}
	i, ok := c.old[dirKey(rel)]
	if !ok {
		return Digest{}, false
	}
	r := &c.recs[i]
	if r.Ino == 0 || r.Ino != self.ino || r.Dev != self.dev || r.Mtime != self.mtime || r.Ctime != self.ctime {
		return Digest{}, false
	}
	c.seen[i] = true
	return Digest{Hash: r.Hash, Size: r.Size}, true
}

// knownDir reports whether the cache recorded digest d for directory rel, and
// keeps the record if so (updating the status it holds to self).
func (c *statCache) knownDir(rel string, d Digest, self snapEntry) bool {
	if c == nil {
		return false
	}
	k := dirKey(rel)
	i, ok := c.old[k]
	if !ok || c.recs[i].Hash != d.Hash || c.recs[i].Size != d.Size {
		return false
	}
	if want := c.dirRecord(d, self); want != c.recs[i] {
		c.mu.Lock()
		c.added[k] = want
		c.mu.Unlock()
	} else {
		c.seen[i] = true
	}
	return true
}

// dirRecord is the record of directory digest d with status self: the status
// only when it is not racy (a directory changed within the second before the
// snapshot could change again without its times moving).
func (c *statCache) dirRecord(d Digest, self snapEntry) statRecord {
	r := statRecord{Size: d.Size, Hash: d.Hash}
	if self.ino != 0 && !c.racy(self) {
		r.Mtime, r.Ctime, r.Dev, r.Ino = self.mtime, self.ctime, self.dev, self.ino
	}
	return r
}

// recordDir records that directory rel, digest d, status self, is stored.
func (c *statCache) recordDir(rel string, d Digest, self snapEntry) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.added[dirKey(rel)] = c.dirRecord(d, self)
	c.mu.Unlock()
}
