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

	"github.com/capfs/capfs/backends/sqlite/internal/sqlschema"
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
	rdb, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: abs}).String()+"?mode=ro&_pragma=busy_timeout(10000)&_pragma=query_only(1)")
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
	ctx, cancel := context.WithTimeout(context.Background(), AgentFSOpenTimeout)
	defer cancel()
	if err := st.agentFSConfig(ctx); err != nil {
		return nil, timedOut(ctx, err)
	}
	// The same keys as a capfs file's chunk rows (ino<<24 | index), computed.
	if st.rdChunk, err = st.q.Prepare(`SELECT (ino << 24) | chunk_index, data FROM fs_data
		WHERE ino = (?1 >> 24) AND chunk_index BETWEEN (?1 & 16777215) AND (?2 & 16777215) ORDER BY chunk_index`); err != nil {
		return nil, classify(err)
	}
	if err := st.loadAgentFS(ctx); err != nil {
		return nil, timedOut(ctx, err)
	}
	ok = true
	return &FS{st: st, root: st.root, origin: st.root}, nil
}

// AgentFSOpenTimeout bounds the time OpenAgentFS spends checking and loading a
// database: past it, the open fails (ErrCorrupt, "took too long").
var AgentFSOpenTimeout = 2 * time.Minute

// agentFSTables are the tables and columns OpenAgentFS reads.
var agentFSTables = []sqlschema.Table{
	{Name: "fs_config", Columns: []string{"key", "value"}},
	{Name: "fs_inode", Columns: []string{"ino", "mode", "size", "mtime", "mtime_nsec"}},
	{Name: "fs_dentry", Columns: []string{"parent_ino", "name", "ino"}},
	{Name: "fs_data", Columns: []string{"ino", "chunk_index", "data"}},
	{Name: "fs_symlink", Columns: []string{"ino", "target"}},
}

// agentFSConfig checks that the database is an AgentFS one of the schema this
// package reads, made of plain tables (sqlschema.Check), and reads its chunk
// size.
func (s *store) agentFSConfig(ctx context.Context) error {
	var ver, cs string
	var n int64
	if err := s.snap.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name = 'fs_config' COLLATE NOCASE`).Scan(&n); err != nil {
		return classify(err)
	}
	if n == 0 {
		return ErrForeign
	}
	// fs_config first, so that another schema version is named as such.
	if err := checkTables(ctx, s.snap, agentFSTables[:1], sqlschema.Shared); err != nil {
		return err
	}
	if err := s.snap.QueryRowContext(ctx, `SELECT value FROM fs_config WHERE key = 'schema_version'`).Scan(&ver); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return ErrForeign
		}
		return classify(err)
	}
	if ver != AgentFSSchema {
		return fmt.Errorf("%w: %s (this capfs reads %s)", ErrAgentFSSchema, ver, AgentFSSchema)
	}
	if err := checkTables(ctx, s.snap, agentFSTables, sqlschema.Shared); err != nil {
		return err
	}
	if err := s.snap.QueryRowContext(ctx, `SELECT value FROM fs_config WHERE key = 'chunk_size'`).Scan(&cs); err != nil {
		return classify(err)
	}
	var err error
	s.chunk, err = strconv.ParseInt(cs, 10, 64)
	if err != nil || s.chunk < 512 || s.chunk > 64<<20 {
		return fmt.Errorf("%w: AgentFS chunk size %q", ErrCorrupt, cs)
	}
	return nil
}

// ErrSchema: a database's tables are not plain tables of the shape the reader
// expects (a view, a virtual table, a generated column, a trigger, a missing
// column, or in a scratch file any object capfs did not make). It comes
// wrapped with ErrCorrupt.
var ErrSchema = sqlschema.ErrShape

// checkTables is sqlschema.Check with its refusals wrapped in ErrCorrupt.
func checkTables(ctx context.Context, q sqlschema.Queryer, want []sqlschema.Table, mode sqlschema.Mode) error {
	err := sqlschema.Check(ctx, q, want, mode)
	if errors.Is(err, sqlschema.ErrShape) {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return classify(err)
}

// timedOut names a failure caused by ctx's deadline.
func timedOut(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: the database took more than %v to check and load", ErrCorrupt, AgentFSOpenTimeout)
	}
	return err
}

// loadAgentFS is load for AgentFS's tables: the inodes, the entries, and a
// check that every file's stored data agrees with its declared size.
func (s *store) loadAgentFS(ctx context.Context) error {
	nodes, err := s.agentInodes(ctx)
	if err != nil {
		return err
	}
	root := nodes[1]
	if root == nil || root.typ != fs.ModeDir {
		return fmt.Errorf("%w: AgentFS database without a root directory", ErrCorrupt)
	}
	if err := s.agentEntries(ctx, nodes); err != nil {
		return err
	}
	if err := s.agentData(ctx, nodes); err != nil {
		return err
	}
	if err := reachable(nodes, root); err != nil {
		return err
	}
	s.root = root
	return nil
}

func (s *store) agentInodes(ctx context.Context) (map[int64]*node, error) {
	rows, err := s.snap.QueryContext(ctx, `SELECT i.ino, i.mode, i.size, i.mtime, i.mtime_nsec, l.target
		FROM fs_inode i LEFT JOIN fs_symlink l ON l.ino = i.ino`)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	nodes := map[int64]*node{}
	for rows.Next() {
		var ino, mode, size, sec, nsec int64
		var target *string
		if err := rows.Scan(&ino, &mode, &size, &sec, &nsec, &target); err != nil {
			return nil, classify(err)
		}
		typ, perm, ok := goMode(mode)
		if !ok {
			continue // a device or FIFO: not served
		}
		if ino <= 0 || ino >= 1<<(63-chunkBits) || size < 0 || nodes[ino] != nil {
			return nil, fmt.Errorf("%w: AgentFS inode %d", ErrCorrupt, ino)
		}
		n := newNode(ino, typ, perm, time.Unix(sec, nsec))
		n.size = size
		if typ == fs.ModeSymlink {
			if target == nil {
				return nil, fmt.Errorf("%w: AgentFS symlink %d has no target", ErrCorrupt, ino)
			}
			n.target = *target
			n.size = int64(len(n.target))
		}
		nodes[ino] = n
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	return nodes, nil
}

func (s *store) agentEntries(ctx context.Context, nodes map[int64]*node) error {
	rows, err := s.snap.QueryContext(ctx, `SELECT parent_ino, name, ino FROM fs_dentry`)
	if err != nil {
		return classify(err)
	}
	defer rows.Close()
	links := map[int64]int{}
	for rows.Next() {
		var parent, ino int64
		var name string
		if err := rows.Scan(&parent, &name, &ino); err != nil {
			return classify(err)
		}
		d, c := nodes[parent], nodes[ino]
		if c == nil {
			continue // an entry of a type not served
		}
		if d == nil || d.typ != fs.ModeDir || !vfs.ValidName(name) || ino == 1 || (c.typ == fs.ModeDir && c.parent != nil) || d.children[name] != nil {
			return fmt.Errorf("%w: AgentFS entry %d/%q -> %d", ErrCorrupt, parent, name, ino)
		}
		d.link(name, c)
		links[ino]++
	}
	if err := rows.Err(); err != nil {
		return classify(err)
	}
	for _, n := range nodes {
		n.nlink = links[n.ino]
	}
	return nil
}

// agentData checks that each regular file's stored data is exactly its
// declared size: chunks numbered from 0 without a gap, each full but the last,
// none longer than the chunk size. A file declaring more than it stores (a
// petabyte in a small database) or less is refused, so reading or importing
// it never produces more bytes than the database holds. Only the lengths are
// read, not the data.
func (s *store) agentData(ctx context.Context, nodes map[int64]*node) error {
	// typeof and length read a value's header, not its bytes; length counts
	// the bytes of a blob only, so any other type is refused.
	rows, err := s.snap.QueryContext(ctx, `SELECT ino, chunk_index, length(data), typeof(data) = 'blob' FROM fs_data ORDER BY ino, chunk_index`)
	if err != nil {
		return classify(err)
	}
	defer rows.Close()
	stored := map[int64]int64{}
	last := struct{ ino, idx, n int64 }{ino: -1}
	for rows.Next() {
		var ino, idx, n int64
		var blob bool
		if err := rows.Scan(&ino, &idx, &n, &blob); err != nil {
			return classify(err)
		}
		if f := nodes[ino]; f == nil || f.typ != 0 {
			continue // data of no file served: never read
		}
		if !blob {
			return fmt.Errorf("%w: AgentFS file %d: chunk %d is not a blob", ErrCorrupt, ino, idx)
		}
		want, prevFull := int64(0), true
		if ino == last.ino {
			want, prevFull = last.idx+1, last.n == s.chunk
		}
		if idx != want || !prevFull || n > s.chunk {
			return fmt.Errorf("%w: AgentFS file %d: chunk %d (%d bytes) is out of place", ErrCorrupt, ino, idx, n)
		}
		stored[ino] += n
		last.ino, last.idx, last.n = ino, idx, n
	}
	if err := rows.Err(); err != nil {
		return classify(err)
	}
	for ino, f := range nodes {
		if f.typ == 0 && stored[ino] != f.size {
			return fmt.Errorf("%w: AgentFS file %d declares %d bytes but stores %d", ErrCorrupt, ino, f.size, stored[ino])
		}
	}
	return nil
}

// reachable refuses a directory named somewhere but not reachable from the
// root (a cycle of directories). Each directory's way up is walked once: the
// directories found reachable are remembered, so a deep tree costs time in
// proportion to its size, not to its size times its depth.
func reachable(nodes map[int64]*node, root *node) error {
	ok := map[*node]bool{root: true}
	var path []*node
	for _, n := range nodes {
		if n.typ != fs.ModeDir || n == root || n.parent == nil {
			continue // not named anywhere: unreachable, harmless
		}
		path = path[:0]
		for d := n; !ok[d]; d = d.parent {
			if d == nil || len(path) > len(nodes) {
				return fmt.Errorf("%w: AgentFS directory %d is not reachable from the root", ErrCorrupt, n.ino)
			}
			path = append(path, d)
		}
		for _, d := range path {
			ok[d] = true
		}
	}
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
//
// maxBytes (<= 0: none) is the import's budget: the sum of the sizes of the
// files and symlink targets it writes. The entry that would exceed it fails
// with quota_exceeded before anything of it is written. A file src serves
// longer or shorter than its Info.Size fails with conflict.
func Import(ctx context.Context, dst *FS, at vfs.Path, src vfs.Backend, maxBytes int64) error {
	im := &importer{ctx: ctx, dst: dst, src: src, seen: map[uint64]vfs.Path{}, buf: make([]byte, dst.st.chunk), left: maxBytes}
	if maxBytes <= 0 {
		im.left = -1
	}
	if err := im.walk(vfs.Root, at); err != nil {
		return err
	}
	// Directory times last: creating their entries changed them.
	for i := len(im.dirs) - 1; i >= 0; i-- {
		if err := dst.Chtimes(ctx, im.dirs[i].p, time.Time{}, im.dirs[i].mt); err != nil {
			return err
		}
	}
	return nil
}

type importer struct {
	ctx  context.Context
	dst  *FS
	src  vfs.Backend
	seen map[uint64]vfs.Path
	buf  []byte
	left int64 // bytes the budget has left; < 0: no budget
	dirs []struct {
		p  vfs.Path
		mt time.Time
	}
}

// charge takes n bytes of the budget for the entry at p.
func (im *importer) charge(p vfs.Path, n int64) error {
	if im.left < 0 {
		return nil
	}
	if n > im.left {
		return vfs.NewError(vfs.CodeQuota, "import", p, "the import's byte budget is spent")
	}
	im.left -= n
	return nil
}

func (im *importer) walk(sp, dp vfs.Path) error {
	ents, err := im.src.ReadDir(im.ctx, sp)
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
		if err := im.entry(s, d); err != nil {
			return err
		}
	}
	return nil
}

// entry copies one entry of src (and, for a directory, its tree).
func (im *importer) entry(s, d vfs.Path) error {
	ctx, dst := im.ctx, im.dst
	info, err := im.src.Lstat(ctx, s)
	if err != nil {
		return err
	}
	switch {
	case info.Mode.IsDir():
		if err := dst.Mkdir(ctx, d, info.Mode&permBits); err != nil {
			return err
		}
		if err := im.walk(s, d); err != nil {
			return err
		}
		im.dirs = append(im.dirs, struct {
			p  vfs.Path
			mt time.Time
		}{d, info.ModTime})
		return nil
	case info.Mode&fs.ModeSymlink != 0:
		t, err := im.src.Readlink(ctx, s)
		if err != nil {
			return err
		}
		if err := im.charge(d, int64(len(t))); err != nil {
			return err
		}
		return dst.Symlink(ctx, t, d)
	case !info.Mode.IsRegular():
		return nil
	}
	if first, ok := im.seen[info.ID]; ok && info.ID != 0 {
		return dst.Link(ctx, first, d)
	}
	if info.Nlink > 1 && info.ID != 0 {
		im.seen[info.ID] = d
	}
	if err := im.charge(d, info.Size); err != nil {
		return err
	}
	if err := copyData(ctx, im.src, s, dst, d, info.Mode&permBits, info.Size, im.buf); err != nil {
		return err
	}
	return dst.Chtimes(ctx, d, time.Time{}, info.ModTime)
}

// copyData copies file sp of src, size bytes, to the new file dp of dst.
func copyData(ctx context.Context, src vfs.Backend, sp vfs.Path, dst *FS, dp vfs.Path, perm fs.FileMode, size int64, buf []byte) error {
	in, err := src.OpenFile(ctx, sp, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := dst.OpenFile(ctx, dp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	n, err := io.CopyBuffer(struct{ io.Writer }{out}, io.LimitReader(struct{ io.Reader }{in}, size+1), buf)
	if err == nil && n != size {
		err = vfs.NewError(vfs.CodeConflict, "import", sp, fmt.Sprintf("the source served %d bytes of a file of %d", n, size))
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
