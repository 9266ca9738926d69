package vfstest

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/capfs/capfs/vfs"
)

// side is one of the two trees a differential script runs on.
type side struct {
	ctx  context.Context
	b    vfs.Backend
	feat vfs.Features // the backend under test's, on both sides: decides what is compared
	h    map[string]vfs.File
}

// step is one operation of a script. run returns what the step observed (compared
// between the sides) and its error (compared by outcome class).
type step struct {
	desc  string
	loose bool // only success vs failure is compared, not the error code
	run   func(s *side) (string, error)
}

// script is a named sequence of steps needing some backend features.
type script struct {
	name  string
	needs []feature
	steps []step
}

// outcome classifies an error: "ok", "EOF", its vfs code, or a marker for an error
// outside the contract (which the checked wrapper reports separately).
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case err == io.EOF:
		return "EOF"
	}
	if c := vfs.CodeOf(err); c != "" {
		return string(c)
	}
	return "non-vfs error"
}

func flagString(flag int) string {
	var parts []string
	switch flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR) {
	case os.O_RDONLY:
		parts = append(parts, "O_RDONLY")
	case os.O_WRONLY:
		parts = append(parts, "O_WRONLY")
	case os.O_RDWR:
		parts = append(parts, "O_RDWR")
	}
	for _, f := range []struct {
		bit  int
		name string
	}{{os.O_CREATE, "O_CREATE"}, {os.O_EXCL, "O_EXCL"}, {os.O_TRUNC, "O_TRUNC"}, {os.O_APPEND, "O_APPEND"}} {
		if flag&f.bit != 0 {
			parts = append(parts, f.name)
		}
	}
	return strings.Join(parts, "|")
}

// describeInfo renders the parts of an Info the sides must agree on.
func describeInfo(i vfs.Info, feat vfs.Features, withName bool) string {
	typ := i.Mode.Type()
	var b strings.Builder
	if withName {
		fmt.Fprintf(&b, "name=%s ", i.Name)
	}
	fmt.Fprintf(&b, "type=%v", typ)
	if !typ.IsDir() {
		fmt.Fprintf(&b, " size=%d", i.Size)
	}
	if typ&fs.ModeSymlink == 0 && feat.Chmod {
		fmt.Fprintf(&b, " perm=%v", i.Mode.Perm())
	}
	if typ.IsRegular() && feat.HardLinks {
		fmt.Fprintf(&b, " nlink=%d", i.Nlink)
	}
	return b.String()
}

func handle(s *side, h string) (vfs.File, error) {
	f, ok := s.h[h]
	if !ok {
		return nil, fmt.Errorf("vfstest: no open handle %q", h)
	}
	return f, nil
}

// Step constructors. Paths are guest paths; handles are names given at open.

func mkdir(path string) step { return mkdirPerm(path, 0o755) }

func mkdirPerm(path string, perm fs.FileMode) step {
	return step{desc: fmt.Sprintf("Mkdir(%s, %v)", path, perm), run: func(s *side) (string, error) {
		return "", s.b.Mkdir(s.ctx, p(path), perm)
	}}
}

func writeFile(path, data string) step {
	return step{desc: fmt.Sprintf("WriteFile(%s, %q)", path, data), run: func(s *side) (string, error) {
		return "", WriteFile(s.ctx, s.b, p(path), []byte(data))
	}}
}

func readFile(path string) step {
	return step{desc: fmt.Sprintf("ReadFile(%s)", path), run: func(s *side) (string, error) {
		data, err := ReadFile(s.ctx, s.b, p(path))
		return fmt.Sprintf("%q", data), err
	}}
}

func open(h, path string, flag int, perm fs.FileMode) step {
	return step{desc: fmt.Sprintf("%s = OpenFile(%s, %s, %v)", h, path, flagString(flag), perm), run: func(s *side) (string, error) {
		if old, ok := s.h[h]; ok {
			old.Close()
			delete(s.h, h)
		}
		f, err := s.b.OpenFile(s.ctx, p(path), flag, perm)
		if err == nil {
			s.h[h] = f
		}
		return "", err
	}}
}

// openClose opens and immediately closes, for checking open outcomes.
func openClose(path string, flag int) step {
	return step{desc: fmt.Sprintf("OpenFile(%s, %s) and Close", path, flagString(flag)), run: func(s *side) (string, error) {
		f, err := s.b.OpenFile(s.ctx, p(path), flag, 0o644)
		if err != nil {
			return "", err
		}
		return "", f.Close()
	}}
}

func closeH(h string) step {
	return step{desc: h + ".Close()", run: func(s *side) (string, error) {
		f, err := handle(s, h)
		if err != nil {
			return "", err
		}
		return "", f.Close()
	}}
}

func write(h, data string) step {
	return step{desc: fmt.Sprintf("%s.Write(%q)", h, data), run: func(s *side) (string, error) {
		f, err := handle(s, h)
		if err != nil {
			return "", err
		}
		n, err := f.Write([]byte(data))
		return fmt.Sprint("n=", n), err
	}}
}

func writeAt(h, data string, off int64) step {
	return step{desc: fmt.Sprintf("%s.WriteAt(%q, %d)", h, data, off), run: func(s *side) (string, error) {
		f, err := handle(s, h)
		if err != nil {
			return "", err
		}
		n, err := f.WriteAt([]byte(data), off)
		return fmt.Sprint("n=", n), err
	}}
}

func read(h string, n int) step {
	return step{desc: fmt.Sprintf("%s.Read(%d bytes)", h, n), run: func(s *side) (string, error) {
		f, err := handle(s, h)
		if err != nil {
			return "", err
		}
		buf := make([]byte, n)
		m, err := f.Read(buf)
		if m == 0 && err == nil && n > 0 {
			// Allowed by io.Reader but unhelpful; read again as callers do.
			m, err = f.Read(buf)
		}
		return fmt.Sprintf("%q", buf[:max(m, 0)]), err
	}}
}

func readAt(h string, n int, off int64) step {
	return step{desc: fmt.Sprintf("%s.ReadAt(%d bytes, %d)", h, n, off), run: func(s *side) (string, error) {
		f, err := handle(s, h)
		if err != nil {
			return "", err
		}
		buf := make([]byte, n)
		m, err := f.ReadAt(buf, off)
		return fmt.Sprintf("%q", buf[:max(m, 0)]), err
	}}
}

func seek(h string, off int64, whence int) step {
	return step{desc: fmt.Sprintf("%s.Seek(%d, %d)", h, off, whence), run: func(s *side) (string, error) {
		f, err := handle(s, h)
		if err != nil {
			return "", err
		}
		pos, err := f.Seek(off, whence)
		if err != nil {
			return "", err
		}
		return fmt.Sprint("pos=", pos), nil
	}}
}

func truncate(h string, size int64) step {
	return step{desc: fmt.Sprintf("%s.Truncate(%d)", h, size), run: func(s *side) (string, error) {
		f, err := handle(s, h)
		if err != nil {
			return "", err
		}
		return "", f.Truncate(size)
	}}
}

func fstat(h string) step {
	return step{desc: h + ".Stat()", run: func(s *side) (string, error) {
		f, err := handle(s, h)
		if err != nil {
			return "", err
		}
		i, err := f.Stat()
		return describeInfo(i, s.feat, false), err
	}}
}

func syncH(h string) step {
	return step{desc: h + ".Sync()", run: func(s *side) (string, error) {
		f, err := handle(s, h)
		if err != nil {
			return "", err
		}
		return "", f.Sync()
	}}
}

func stat(path string) step {
	return step{desc: fmt.Sprintf("Stat(%s)", path), run: func(s *side) (string, error) {
		i, err := s.b.Stat(s.ctx, p(path))
		return describeInfo(i, s.feat, true), err
	}}
}

func lstat(path string) step {
	return step{desc: fmt.Sprintf("Lstat(%s)", path), run: func(s *side) (string, error) {
		i, err := s.b.Lstat(s.ctx, p(path))
		return describeInfo(i, s.feat, true), err
	}}
}

func statTime(path string) step {
	return step{desc: fmt.Sprintf("Stat(%s).ModTime", path), run: func(s *side) (string, error) {
		i, err := s.b.Stat(s.ctx, p(path))
		return i.ModTime.UTC().Format(time.RFC3339Nano), err
	}}
}

func readDir(path string) step {
	return step{desc: fmt.Sprintf("ReadDir(%s)", path), run: func(s *side) (string, error) {
		ents, err := s.b.ReadDir(s.ctx, p(path))
		var b strings.Builder
		for _, e := range ents {
			fmt.Fprintf(&b, "%s:%v ", e.Name, e.Type.Type())
		}
		return b.String(), err
	}}
}

func rename(from, to string) step {
	return step{desc: fmt.Sprintf("Rename(%s, %s)", from, to), run: func(s *side) (string, error) {
		return "", s.b.Rename(s.ctx, p(from), p(to), 0)
	}}
}

func remove(path string) step {
	return step{desc: fmt.Sprintf("Remove(%s)", path), run: func(s *side) (string, error) {
		return "", s.b.Remove(s.ctx, p(path))
	}}
}

func symlink(target, path string) step {
	return step{desc: fmt.Sprintf("Symlink(%q, %s)", target, path), run: func(s *side) (string, error) {
		return "", s.b.Symlink(s.ctx, target, p(path))
	}}
}

func readlink(path string) step {
	return step{desc: fmt.Sprintf("Readlink(%s)", path), run: func(s *side) (string, error) {
		t, err := s.b.Readlink(s.ctx, p(path))
		return fmt.Sprintf("%q", t), err
	}}
}

func link(oldp, newp string) step {
	return step{desc: fmt.Sprintf("Link(%s, %s)", oldp, newp), run: func(s *side) (string, error) {
		return "", s.b.Link(s.ctx, p(oldp), p(newp))
	}}
}

func chmodTo(path string, mode fs.FileMode) step {
	return step{desc: fmt.Sprintf("Chmod(%s, %v)", path, mode), run: func(s *side) (string, error) {
		return "", s.b.Chmod(s.ctx, p(path), mode)
	}}
}

func chtimesTo(path string, atime, mtime time.Time) step {
	return step{desc: fmt.Sprintf("Chtimes(%s, %v, %v)", path, atime, mtime), run: func(s *side) (string, error) {
		return "", s.b.Chtimes(s.ctx, p(path), atime, mtime)
	}}
}

// loose marks a step whose error code is incidental on the host (for example EBADF
// for a write on a read-only handle): only success vs failure is compared.
func loose(s step) step {
	s.loose = true
	s.desc += " [any error]"
	return s
}

// dumpTree describes every entry of b for the final comparison: type, size and
// contents of files, link targets, and the permissions and link counts the backend
// claims to support.
func dumpTree(ctx context.Context, b vfs.Backend, feat vfs.Features) (string, error) {
	var out strings.Builder
	var walk func(dir vfs.Path) error
	walk = func(dir vfs.Path) error {
		ents, err := b.ReadDir(ctx, dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			c, err := dir.Child(e.Name)
			if err != nil {
				return err
			}
			i, err := b.Lstat(ctx, c)
			if err != nil {
				return err
			}
			fmt.Fprintf(&out, "%s: %s", c, describeInfo(i, feat, true))
			switch typ := i.Mode.Type(); {
			case typ&fs.ModeSymlink != 0:
				t, err := b.Readlink(ctx, c)
				if err != nil {
					return err
				}
				fmt.Fprintf(&out, " -> %q\n", t)
			case typ.IsDir():
				out.WriteString("\n")
				if err := walk(c); err != nil {
					return err
				}
			case typ.IsRegular():
				data, err := ReadFile(ctx, b, c)
				if err != nil {
					return err
				}
				fmt.Fprintf(&out, " %q\n", data)
			default:
				out.WriteString("\n")
			}
		}
		return nil
	}
	if err := walk(vfs.Root); err != nil {
		return "", fmt.Errorf("dump: %w (%s)", err, outcome(err))
	}
	return out.String(), nil
}
