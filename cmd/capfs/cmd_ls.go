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
		useColor, err := colorWanted(color, cmd.OutOrStdout())
		if err != nil {
			return usageErrorf("ls: --color %s: %v", color, err)
		}
		col := colors{on: useColor}
		w := bufio.NewWriter(cmd.OutOrStdout())
		defer w.Flush()
		st, err := s.Root.Stat(ctx, p)
		if err != nil || !st.IsDir() {
			// A file, or a link (even one leaving its mount): list it alone.
			info, lerr := s.Root.Lstat(ctx, p)
			if lerr != nil {
				if err != nil {
					return err
				}
				return lerr
			}
			vp, _ := vfs.ParseGuest(p)
			if asJSON {
				return writeJSON(w, []*jsonEntry{newJSONEntry(ctx, s.Root, vp.String(), p, info)})
			}
			return lsLine(ctx, w, s.Root, p, p, info, long, col)
		}
		var skipped unaddressable
		entries, err := s.Root.ReadDir(skipped.context(ctx, p), p)
		if err != nil {
			return err
		}
		defer skipped.report(cmd.ErrOrStderr(), "ls")
		var firstErr error
		var out []*jsonEntry
		vp, _ := vfs.ParseGuest(p)
		for _, e := range entries {
			if why := vfs.NameProblem(e.Name()); why != "" {
				// Listed by a backend that does not leave such names out (git).
				skipped.note(vfs.Unaddressable{Name: e.Name(), Reason: why})
				continue
			}
			full := path.Join(vp.String(), e.Name())
			if !long && !asJSON {
				name := show(e.Name())
				switch {
				case e.IsDir():
					name = col.dir(name) + "/"
				case e.Type()&fs.ModeSymlink != 0:
					name = col.link(name)
				}
				if _, err := fmt.Fprintln(w, name); err != nil {
					return err
				}
				continue
			}
			info, err := e.Info()
			if vfs.CodeOf(err) == vfs.CodePermission {
				// The policy hides this entry's metadata (a secret): show the name only.
				if asJSON {
					out = append(out, newJSONEntry(ctx, s.Root, full, e.Name(), nil))
					continue
				}
				if _, err := fmt.Fprintf(w, "%-10s %10s %16s %s\n", "?", "?", "?", show(e.Name())); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				// Listed with its error; the others are still listed.
				if firstErr == nil {
					firstErr = err
				}
				if !asJSON {
					fmt.Fprintf(w, "%-10s %10s %16s %s [%s]\n", "?", "?", "?", show(e.Name()), show(errMessage(err)))
				}
				continue
			}
			if asJSON {
				out = append(out, newJSONEntry(ctx, s.Root, full, e.Name(), info))
				continue
			}
			if err := lsLine(ctx, w, s.Root, full, e.Name(), info, long, col); err != nil {
				return err
			}
		}
		if asJSON {
			if out == nil {
				out = []*jsonEntry{}
			}
			if err := writeJSON(w, out); err != nil {
				return err
			}
		}
		return firstErr
	})
	return cmd
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
