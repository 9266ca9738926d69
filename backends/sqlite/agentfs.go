package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/capfs/capfs/vfs"
)

// AgentFSSchema is the AgentFS schema version OpenAgentFS reads (its SPEC's
// fs_inode, fs_dentry, fs_data, fs_symlink and fs_config tables).
const AgentFSSchema = "0.4"

// ErrAgentFSSchema: the file is an AgentFS database of a schema version
// OpenAgentFS does not read.
var ErrAgentFSSchema = errors.New("unsupported AgentFS schema version")

// OpenAgentFS opens an AgentFS database (Turso's agent filesystem, schema
// 0.4) as a read-only vfs.Backend: the same tree, modes, times, hard links and
// symlinks, served by this package's read path (metadata in memory, data read
// from fs_data in AgentFS's chunks). Entries of other types (devices, FIFOs)
// are left out. The database is opened read-only and not locked, so an AgentFS
// process may keep using it; the FS shows it as of the call. A file that is
// not an AgentFS database fails with ErrForeign, another schema version with
// ErrAgentFSSchema. Everything is read in one read transaction held until
// Close, so the FS is one point in time even while AgentFS writes. Use Import
// to copy it into a capfs scratch file.
func OpenAgentFS(name string) (*FS, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, err
	}
	if err := checkHeader(abs, true); err != nil {
		return nil, err
	}
	st := &store{cfg: config{clock: time.Now, readOnly: true}, path: abs}
	rdb, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: abs}).String()+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	st.rdb, st.q = rdb, rdb
	ok := false
	defer func() {
		if !ok {
			st.closeAll()
		}
	}()
	if err := st.pinSnapshot(); err != nil {
		return nil, err
	}
	var ver, cs string
	if err := st.q.QueryRow(`SELECT value FROM fs_config WHERE key = 'schema_version'`).Scan(&ver); err != nil {
		if errors.Is(err, sql.ErrNoRows) || isNoTable(err) {
			return nil, ErrForeign
		}
		return nil, classify(err)
	}
	if ver != AgentFSSchema {
		return nil, fmt.Errorf("%w: %s (this capfs reads %s)", ErrAgentFSSchema, ver, AgentFSSchema)
	}
	if err := st.q.QueryRow(`SELECT value FROM fs_config WHERE key = 'chunk_size'`).Scan(&cs); err != nil {
		return nil, classify(err)
	}
	st.chunk, err = strconv.ParseInt(cs, 10, 64)
	if err != nil || st.chunk < 512 || st.chunk > 64<<20 {
		return nil, fmt.Errorf("%w: AgentFS chunk size %q", ErrCorrupt, cs)
	}
	// The same keys as a capfs file's chunk rows (ino<<24 | index), computed.
	if st.rdChunk, err = st.q.Prepare(`SELECT (ino << 24) | chunk_index, data FROM fs_data
		WHERE ino = (?1 >> 24) AND chunk_index BETWEEN (?1 & 16777215) AND (?2 & 16777215) ORDER BY chunk_index`); err != nil {
		return nil, classify(err)
	}
	if err := st.loadAgentFS(); err != nil {
		return nil, err
	}
	ok = true
	return &FS{st: st, root: st.root, origin: st.root}, nil
}

func isNoTable(err error) bool {
	return err != nil && (errors.Is(err, sql.ErrNoRows) || containsFold(err.Error(), "no such table"))
}

func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// loadAgentFS is load for AgentFS's tables.
func (s *store) loadAgentFS() error {
	rows, err := s.q.Query(`SELECT i.ino, i.mode, i.size, i.mtime, i.mtime_nsec, l.target
		FROM fs_inode i LEFT JOIN fs_symlink l ON l.ino = i.ino`)
	if err != nil {
		return classify(err)
	}
	nodes := map[int64]*node{}
	for rows.Next() {
		var ino, mode, size, sec, nsec int64
		var target *string
		if err := rows.Scan(&ino, &mode, &size, &sec, &nsec, &target); err != nil {
			rows.Close()
			return classify(err)
		}
		typ, perm, ok := goMode(mode)
		if !ok {
			continue // a device or FIFO: not served
		}
		if ino <= 0 || ino >= 1<<(63-chunkBits) || size < 0 {
			rows.Close()
			return fmt.Errorf("%w: AgentFS inode %d", ErrCorrupt, ino)
		}
		n := newNode(ino, typ, perm, time.Unix(sec, nsec))
		n.size = size
		if typ == fs.ModeSymlink {
			if target == nil {
				rows.Close()
				return fmt.Errorf("%w: AgentFS symlink %d has no target", ErrCorrupt, ino)
			}
			n.target = *target
			n.size = int64(len(n.target))
		}
		nodes[ino] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return classify(err)
	}
	root := nodes[1]
	if root == nil || root.typ != fs.ModeDir {
		return fmt.Errorf("%w: AgentFS database without a root directory", ErrCorrupt)
	}
	rows, err = s.q.Query(`SELECT parent_ino, name, ino FROM fs_dentry`)
	if err != nil {
		return classify(err)
	}
	links := map[int64]int{}
	for rows.Next() {
		var parent, ino int64
		var name string
		if err := rows.Scan(&parent, &name, &ino); err != nil {
			rows.Close()
			return classify(err)
		}
		d, c := nodes[parent], nodes[ino]
		if c == nil {
			continue // an entry of a type not served
		}
		if d == nil || d.typ != fs.ModeDir || !vfs.ValidName(name) || ino == 1 || (c.typ == fs.ModeDir && c.parent != nil) {
			rows.Close()
			return fmt.Errorf("%w: AgentFS entry %d/%q -> %d", ErrCorrupt, parent, name, ino)
		}
		d.link(name, c)
		links[ino]++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return classify(err)
	}
	for _, n := range nodes {
		n.nlink = links[n.ino]
		if n.typ == fs.ModeDir && n != root {
			depth := 0
			for d := n; d != root; d = d.parent {
				if d == nil || depth > len(nodes) {
					if n.parent == nil {
						break // not named anywhere: unreachable, harmless
					}
					return fmt.Errorf("%w: AgentFS directory %d is not reachable from the root", ErrCorrupt, n.ino)
				}
				depth++
			}
		}
	}
	s.root = root
	return nil
}

// Import copies the whole tree of src into directory at of dst, as the
// Backend SPI shows it: directories, files (streamed one chunk at a time),
// symlinks (verbatim), hard links (files src reports with the same Info.ID
// and Nlink > 1 become one inode), permission bits and modification times.
// Names that exist in dst are an error (already_exists); at must exist. It is
// how an AgentFS database (OpenAgentFS) or any other backend becomes a capfs
// scratch file. Each file is its own operations; a failure leaves what was
// copied so far.
func Import(ctx context.Context, dst *FS, at vfs.Path, src vfs.Backend) error {
	seen := map[uint64]vfs.Path{}
	buf := make([]byte, dst.st.chunk)
	var dirs []struct {
		p  vfs.Path
		mt time.Time
	}
	var walk func(sp, dp vfs.Path) error
	walk = func(sp, dp vfs.Path) error {
		ents, err := src.ReadDir(ctx, sp)
		if err != nil {
			return err
		}
		for _, e := range ents {
			s, err := sp.Child(e.Name)
			if err != nil {
				return err
			}
			d, err := dp.Child(e.Name)
			if err != nil {
				return err
			}
			info, err := src.Lstat(ctx, s)
			if err != nil {
				return err
			}
			switch {
			case info.Mode.IsDir():
				if err := dst.Mkdir(ctx, d, info.Mode&permBits); err != nil {
					return err
				}
				if err := walk(s, d); err != nil {
					return err
				}
				dirs = append(dirs, struct {
					p  vfs.Path
					mt time.Time
				}{d, info.ModTime})
				continue
			case info.Mode&fs.ModeSymlink != 0:
				t, err := src.Readlink(ctx, s)
				if err != nil {
					return err
				}
				if err := dst.Symlink(ctx, t, d); err != nil {
					return err
				}
				continue
			case !info.Mode.IsRegular():
				continue
			}
			if first, ok := seen[info.ID]; ok && info.ID != 0 {
				if err := dst.Link(ctx, first, d); err != nil {
					return err
				}
				continue
			}
			if info.Nlink > 1 && info.ID != 0 {
				seen[info.ID] = d
			}
			if err := copyData(ctx, src, s, dst, d, info.Mode&permBits, buf); err != nil {
				return err
			}
			if err := dst.Chtimes(ctx, d, time.Time{}, info.ModTime); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(vfs.Root, at); err != nil {
		return err
	}
	// Directory times last: creating their entries changed them.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := dst.Chtimes(ctx, dirs[i].p, time.Time{}, dirs[i].mt); err != nil {
			return err
		}
	}
	return nil
}

func copyData(ctx context.Context, src vfs.Backend, sp vfs.Path, dst *FS, dp vfs.Path, perm fs.FileMode, buf []byte) error {
	in, err := src.OpenFile(ctx, sp, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := dst.OpenFile(ctx, dp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.CopyBuffer(struct{ io.Writer }{out}, struct{ io.Reader }{in}, buf)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
