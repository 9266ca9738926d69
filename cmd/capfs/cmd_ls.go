package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

func newLsCmd(o *globalOptions) *cobra.Command {
	var long, asJSON bool
	var color string
	cmd := &cobra.Command{
		Use:   "ls [PATH]",
		Short: "List a directory of the namespace (default: its root)",
		Long: `List the entries of directory PATH (default "/", the namespace root), sorted by
name; directories end in "/". A file or a symlink is listed by itself. With -l,
each line shows the type and permission bits, the size, the modification time,
the name, and a symlink's target with a note in brackets when the link leaves
its mount (an absolute target, which is not shown, or one climbing above the
mount's root: capfs never follows it), dangles or loops. An entry whose
metadata the policy hides (a secret) shows "?" in place of them. Every entry is
listed: one that cannot be described is shown with its error, and the command
then exits 1. A host name no capfs path can hold (one containing a backslash)
cannot be listed or read: each is named on stderr with the reason. --json
prints the entries as a JSON array.`,
		Args: cobra.MaximumNArgs(1),
	}
	cmd.Flags().BoolVarP(&long, "long", "l", false, "long format: mode, size, modification time, name, link target")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of entries (name, path, type, mode, perm, size, mtime, target, link_note, hidden)")
	cmd.Flags().StringVar(&color, "color", "auto", "colour directories and links: auto (on a terminal, unless NO_COLOR is set), always or never")
	cmd.RunE = action(o, func(ctx context.Context, cmd *cobra.Command, s *session, args []string) error {
		p := "/"
		if len(args) == 1 {
			p = args[0]
		}
		useColor, err := colorWanted(s.env, color, cmd.OutOrStdout())
		if err != nil {
			return usageErrorf("ls: --color %s: %v", color, err)
		}
		w := bufio.NewWriter(cmd.OutOrStdout())
		defer w.Flush()
		l := &lsRun{ctx: ctx, s: s, w: w, long: long, asJSON: asJSON, col: colors{on: useColor}}
		st, err := s.Root.Stat(ctx, p)
		if err != nil || !st.IsDir() {
			return l.alone(p, err)
		}
		var skipped unaddressable
		entries, err := s.Root.ReadDir(skipped.context(ctx, p), p)
		if err != nil {
			return err
		}
		defer skipped.report(cmd.ErrOrStderr(), "ls")
		return l.list(p, entries, &skipped)
	})
	return cmd
}

// lsRun is one ls: its options and output, and the first entry that failed.
type lsRun struct {
	ctx          context.Context
	s            *session
	w            io.Writer
	long, asJSON bool
	col          colors
	out          []*jsonEntry
	firstErr     error
}

// alone lists p, a file or a link (even one leaving its mount), by itself;
// statErr is what Stat said of it.
func (l *lsRun) alone(p string, statErr error) error {
	info, lerr := l.s.Root.Lstat(l.ctx, p)
	if lerr != nil {
		if statErr != nil {
			return statErr
		}
		return lerr
	}
	vp, _ := vfs.ParseGuest(p)
	if l.asJSON {
		return writeJSON(l.w, []*jsonEntry{newJSONEntry(l.ctx, l.s.Root, vp.String(), p, info)})
	}
	return lsLine(l.ctx, l.w, l.s.Root, p, p, info, l.long, l.col)
}

// list lists entries of directory p; names no capfs path can hold go to
// skipped.
func (l *lsRun) list(p string, entries []fs.DirEntry, skipped *unaddressable) error {
	vp, _ := vfs.ParseGuest(p)
	for _, e := range entries {
		if why := vfs.NameProblem(e.Name()); why != "" {
			// Listed by a backend that does not leave such names out (git).
			skipped.note(vfs.Unaddressable{Name: e.Name(), Reason: why})
			continue
		}
		if err := l.entry(path.Join(vp.String(), e.Name()), e); err != nil {
			return err
		}
	}
	if l.asJSON {
		if l.out == nil {
			l.out = []*jsonEntry{}
		}
		if err := writeJSON(l.w, l.out); err != nil {
			return err
		}
	}
	return l.firstErr
}

// entry lists e, at full: its name alone, or with -l or --json its status
// ("?" where the policy hides it, its error where it fails).
func (l *lsRun) entry(full string, e fs.DirEntry) error {
	if !l.long && !l.asJSON {
		name := show(e.Name())
		switch {
		case e.IsDir():
			name = l.col.dir(name) + "/"
		case e.Type()&fs.ModeSymlink != 0:
			name = l.col.link(name)
		}
		_, err := fmt.Fprintln(l.w, name)
		return err
	}
	info, err := e.Info()
	switch {
	case vfs.CodeOf(err) == vfs.CodePermission:
		// The policy hides this entry's metadata (a secret): show the name only.
		if l.asJSON {
			l.out = append(l.out, newJSONEntry(l.ctx, l.s.Root, full, e.Name(), nil))
			return nil
		}
		_, err := fmt.Fprintf(l.w, "%-10s %10s %16s %s\n", "?", "?", "?", show(e.Name()))
		return err
	case err != nil:
		// Listed with its error; the others are still listed.
		if l.firstErr == nil {
			l.firstErr = err
		}
		if !l.asJSON {
			fmt.Fprintf(l.w, "%-10s %10s %16s %s [%s]\n", "?", "?", "?", show(e.Name()), show(errMessage(err)))
		}
		return nil
	case l.asJSON:
		l.out = append(l.out, newJSONEntry(l.ctx, l.s.Root, full, e.Name(), info))
		return nil
	}
	return lsLine(l.ctx, l.w, l.s.Root, full, e.Name(), info, l.long, l.col)
}

// lsLine writes one entry: its name (directories with a trailing "/"), or with long
// its mode, size, time, name and link target.
func lsLine(ctx context.Context, w io.Writer, d *dir.Dir, full, name string, info fs.FileInfo, long bool, col colors) error {
	name = show(name)
	switch {
	case info.IsDir():
		name = col.dir(name) + "/"
	case info.Mode()&fs.ModeSymlink != 0:
		name = col.link(name)
	}
	if !long {
		_, err := fmt.Fprintln(w, name)
		return err
	}
	target := ""
	if info.Mode()&fs.ModeSymlink != 0 {
		t, abs, note := linkInfo(ctx, d, full)
		target = linkText(t, abs, note)
		if note != "" {
			target = col.warn(target)
		}
	}
	_, err := fmt.Fprintf(w, "%s %10d %s %s%s\n", info.Mode(), info.Size(), info.ModTime().Format("2006-01-02 15:04"), name, target)
	return err
}

// unaddressable collects, per directory, the entries listings left out
// because no capfs path can name them (vfs.WithUnaddressable), so that a
// command names each once on stderr instead of dropping it silently.
type unaddressable struct {
	mu    sync.Mutex
	cur   string // the directory being listed
	dirs  []string
	names map[string][]vfs.Unaddressable
}

// context returns ctx reporting to u, the directory being listed set to dir.
func (u *unaddressable) context(ctx context.Context, dir string) context.Context {
	u.at(dir)
	return vfs.WithUnaddressable(ctx, u.note)
}

// at says that the listings from now on are of directory dir (a Walk lists a
// directory right after visiting it).
func (u *unaddressable) at(dir string) {
	u.mu.Lock()
	u.cur = dir
	u.mu.Unlock()
}

func (u *unaddressable) note(e vfs.Unaddressable) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.names == nil {
		u.names = map[string][]vfs.Unaddressable{}
	}
	for _, o := range u.names[u.cur] {
		if o.Name == e.Name {
			return
		}
	}
	if len(u.names[u.cur]) == 0 {
		u.dirs = append(u.dirs, u.cur)
	}
	u.names[u.cur] = append(u.names[u.cur], e)
}

// report writes a line per directory where names were left out.
func (u *unaddressable) report(w io.Writer, command string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, d := range u.dirs {
		es := u.names[d]
		parts := make([]string, len(es))
		for i, e := range es {
			parts[i] = show(e.Name) + ": " + e.Reason
		}
		slices.Sort(parts)
		where := ""
		if d != "" {
			vp, _ := vfs.ParseGuest(d)
			where = showPath(vp.String()) + ": "
		}
		fmt.Fprintf(w, "capfs %s: %sskipped %d %s the capability cannot address (%s)\n", command, where,
			len(es), plural(len(es), "name", "names"), strings.Join(parts, "; "))
	}
}
