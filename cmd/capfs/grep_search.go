package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/internal/search"
	"github.com/capfs/capfs/vfs"
)

// grepRun is one invocation's state.
type grepRun struct {
	s     *session
	o     *grepOptions
	m     *lineMatcher
	max   int64 // file size limit, <0: none
	names bool  // print file names
	ctxB  int
	ctxA  int
	ctxOn bool // context was asked for (even 0 lines): groups are separated by "--"
	col   colors
	// results
	mu       sync.Mutex
	denied   []string // paths the policy refused
	why      map[string]bool
	tooLarge []string
	errs     int
}

// defaultRoot is what grep searches without a PATH: the working mount when it is
// mounted, else the whole namespace.
func (r *grepRun) defaultRoot() string {
	work := r.s.Work
	if work == "" {
		work = defaultWork
	}
	if p, err := vfs.ParseGuest(work); err == nil {
		for _, m := range r.s.Mounts {
			if m.Path.String() == p.String() {
				return work
			}
		}
	}
	return "/"
}

// grepJob is one file searched: its output, in the order of the walk.
type grepJob struct {
	path    string // namespace path, cleaned
	display string // the path as printed (escaped)
	out     bytes.Buffer
	msg     string // an error for standard error (escaped)
	matched bool
	// explicit: named as a PATH (not met while walking); a binary file named
	// so is searched, as grep does, where one met while walking is skipped.
	explicit bool
}

// searchRoot searches one PATH with the engine the MCP grep uses
// (internal/search: a parallel walk in name order honouring .gitignore files,
// from the PATH's mount root down, and skipping .git), calling emit with each
// file that printed something or matched, in walk order, and with each error
// met. It returns errGrepStop when emit asked to stop, or the context's error.
func (r *grepRun) searchRoot(ctx context.Context, root string, seen map[string]bool, emit func(*grepJob) error) error {
	emitErr := func(msg string) error {
		r.mu.Lock()
		r.errs++
		r.mu.Unlock()
		return emit(&grepJob{msg: msg})
	}
	vp, err := vfs.ParseGuest(root)
	if err != nil {
		return emitErr(show(root) + ": " + show(errMessage(err)))
	}
	st, err := r.s.Root.Stat(ctx, root)
	if err != nil {
		if vfs.CodeOf(err) == vfs.CodePermission {
			r.deny(vp.String(), err)
			return nil
		}
		return emitErr(show(root) + ": " + show(errMessage(err)))
	}
	// The printed prefix: the argument as written, without a trailing slash.
	prefix := strings.TrimSuffix(root, "/")
	if root == "/" {
		prefix = ""
	} else if prefix == "" {
		prefix = root
	}
	clean := vp.String()
	if !st.IsDir() {
		if !st.Mode().IsRegular() {
			return emitErr(show(root) + ": not a regular file")
		}
		if !r.fileWanted(path.Base(clean)) {
			return nil
		}
	}
	display := func(p string) string {
		if !st.IsDir() {
			return root
		}
		rel := p
		if clean != "." {
			rel = strings.TrimPrefix(strings.TrimPrefix(p, clean), "/")
		}
		return prefixJoin(prefix, rel)
	}
	opts := search.Options{
		NoGitignore:  r.o.noIgnore,
		DotGit:       r.o.dotGit,
		Include:      r.o.includes,
		ExcludeFiles: r.o.excludes,
		ExcludeDirs:  r.o.excludeDirs,
		MaxFileSize:  r.max,
		// A binary file met by the walk is skipped (as rg does): the engine
		// tells it from its first bytes without reading the rest. One named
		// on the command line is searched (it may say "binary file matches").
		SkipBinary: st.IsDir() && !r.o.text,
		Custom: func(p string, data []byte) (any, bool) {
			j := &grepJob{path: p, display: show(display(p)), explicit: !st.IsDir()}
			if r.max == 0 && len(data) > 0 {
				r.mu.Lock()
				r.tooLarge = append(r.tooLarge, p)
				r.mu.Unlock()
				return nil, false
			}
			r.searchFile(j, data)
			return j, j.matched || j.out.Len() > 0
		},
	}
	if r.max <= 0 {
		opts.MaxFileSize = -1 // none (0: every non-empty file is too large, above)
	}
	if m, _, ok := r.s.mountAt(vp); ok {
		opts.IgnoreAbove = m.Path.String() // the .gitignore files from the mount's root down
	}
	// The files and directories read are logged as one audit event (the
	// session's sink batches them); refusals stay one event each.
	batch := &audit.Batch{Op: "grep", Path: clean}
	defer batch.Flush(ctx)
	sum, err := search.Search(audit.WithBatch(ctx, batch), r.s.Root, clean, opts, func(f *search.File) error {
		if seen[f.Path] {
			return nil
		}
		seen[f.Path] = true
		return emit(f.Value.(*grepJob))
	})
	if err != nil {
		if errors.Is(err, errGrepStop) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return emitErr(show(root) + ": " + show(errMessage(err)))
	}
	for _, sk := range sum.Skipped {
		switch sk.Reason {
		case search.SkipDenied:
			r.deny(sk.Path, sk.Err)
		case search.SkipTooLarge:
			r.mu.Lock()
			r.tooLarge = append(r.tooLarge, sk.Path)
			r.mu.Unlock()
		default:
			if err := emitErr(show(display(sk.Path)) + ": " + show(errMessage(sk.Err))); err != nil {
				return err
			}
		}
	}
	return nil
}

func prefixJoin(prefix, name string) string {
	switch {
	case prefix == "":
		return name
	case name == "":
		return prefix
	case strings.HasSuffix(prefix, "/"):
		return prefix + name
	}
	return prefix + "/" + name
}

func splitPath(p string) []string {
	if p == "." || p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := doublestar.Match(g, name); ok {
			return true
		}
	}
	return false
}

// fileWanted applies --include and --exclude to a file's base name.
func (r *grepRun) fileWanted(name string) bool {
	if len(r.o.includes) > 0 && !matchAny(r.o.includes, name) {
		return false
	}
	return !matchAny(r.o.excludes, name)
}

func (r *grepRun) deny(p string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.denied = append(r.denied, p)
	var ve *vfs.Error
	if errors.As(err, &ve) {
		// "the path matches a protected secret pattern (**/.env)": keep "secret **/.env".
		msg := messageOf(ve)
		if i := strings.LastIndex(msg, " ("); i >= 0 && strings.HasSuffix(msg, ")") && strings.Contains(msg, "secret") {
			msg = "secret " + msg[i+2:len(msg)-1]
		}
		r.why[msg] = true
	}
}

// summarize writes, once, what was not searched and how to search it.
func (r *grepRun) summarize(w io.Writer) {
	if r.o.noMessages {
		return
	}
	list := func(ps []string) string {
		sort.Strings(ps)
		shown := make([]string, 0, 3)
		for i, p := range ps {
			if i == 3 {
				break
			}
			shown = append(shown, showPath(p))
		}
		s := strings.Join(shown, ", ")
		if len(ps) > 3 {
			s += fmt.Sprintf(" and %d more", len(ps)-3)
		}
		return s
	}
	if n := len(r.denied); n > 0 {
		why := make([]string, 0, len(r.why))
		for k := range r.why {
			why = append(why, k)
		}
		sort.Strings(why)
		fmt.Fprintf(w, "capfs: grep: %d %s not searched, refused by the policy (%s): %s; pass --allow-secret GLOB to search one, or --allow-test-fixtures for test data directories\n",
			n, plural(n, "path", "paths"), show(strings.Join(why, ", ")), list(r.denied))
	}
	if n := len(r.tooLarge); n > 0 {
		fmt.Fprintf(w, "capfs: grep: %d %s larger than --max-filesize %s not searched: %s; raise it with --max-filesize SIZE (or none)\n",
			n, plural(n, "file", "files"), formatQuota(r.max), list(r.tooLarge))
	}
}

// searchFile searches one file's contents, filling j. It runs on the
// engine's workers, several at once.
func (r *grepRun) searchFile(j *grepJob, data []byte) {
	if !r.o.text && bytes.IndexByte(data, 0) >= 0 {
		if !j.explicit {
			return // binary, met while walking: skipped, as rg does
		}
		o := r.o
		if o.count || o.filesWith || o.filesWithout || o.quiet {
			r.searchData(j, data)
			return
		}
		// As grep: one line saying so instead of the matching lines.
		if _, _, ok := r.m.next(data, 0); ok {
			j.matched = true
			j.out.WriteString("capfs: grep: " + j.display + ": binary file matches (-a searches it as text)\n")
		}
		return
	}
	r.searchData(j, data)
}

// searchData finds the selected lines of data and writes j's output.
func (r *grepRun) searchData(j *grepJob, data []byte) {
	o := r.o
	lw := &lineWriter{r: r, j: j, data: data, lnum: 1, printed: -1}
	count := 0
	for pos := 0; pos < len(data); {
		ls, le, ok := r.m.next(data, pos)
		if !ok {
			break
		}
		count++
		j.matched = true
		if o.quiet || o.filesWith || o.filesWithout {
			break
		}
		switch {
		case o.count:
		case o.only:
			if !o.invert {
				lw.onlyMatches(ls, le)
			}
		default:
			lw.withContext(ls, le)
		}
		pos = le + 1
		if o.maxCount > 0 && count >= o.maxCount {
			break
		}
	}
	lw.afterCtx(len(data) + 1)
	lw.finish(count)
}

// lineWriter writes one file's selected lines, their context and names to
// its job's output, keeping the line count and what it printed.
type lineWriter struct {
	r          *grepRun
	j          *grepJob
	data       []byte
	lpos, lnum int  // lnum is the number of the line starting at lpos
	printed    int  // end (exclusive, past the newline) of the last line printed; -1: none
	anyPrinted bool // a line was printed
	afterLeft  int  // trailing context lines still to print
}

// nameSep writes the file's name and sep, when names are shown.
func (w *lineWriter) nameSep(sep byte) {
	if !w.r.names {
		return
	}
	out, col := &w.j.out, w.r.col
	out.WriteString(col.name(w.j.display))
	if w.r.o.nullSep {
		out.WriteByte(0)
	} else {
		out.WriteString(col.sep(string(sep)))
	}
}

// lineNo is the number of the line starting at at (at moves forward only).
func (w *lineWriter) lineNo(at int) int {
	w.lnum += bytes.Count(w.data[w.lpos:at], []byte{'\n'})
	w.lpos = at
	return w.lnum
}

// writeLine writes line [ls, le) with sep, its matches coloured when
// selected.
func (w *lineWriter) writeLine(ls, le int, sep byte, selected bool) {
	out, col, o := &w.j.out, w.r.col, w.r.o
	w.nameSep(sep)
	if o.lineNumber {
		out.WriteString(col.num(strconv.Itoa(w.lineNo(ls))))
		out.WriteString(col.sep(string(sep)))
	}
	line := w.data[ls:le]
	if selected && !o.invert && col.on {
		last := 0
		for _, mm := range w.r.m.matches(line) {
			out.Write(line[last:mm[0]])
			out.WriteString(col.match(string(line[mm[0]:mm[1]])))
			last = mm[1]
		}
		out.Write(line[last:])
	} else {
		out.Write(line)
	}
	out.WriteByte('\n')
	w.printed = min(le+1, len(w.data)+1)
	w.anyPrinted = true
}

// afterCtx prints up to the trailing context lines left after the last
// printed one, stopping before limit.
func (w *lineWriter) afterCtx(limit int) {
	for w.afterLeft > 0 && w.printed >= 0 && w.printed < limit && w.printed < len(w.data) {
		le := lineEnd(w.data, w.printed)
		w.writeLine(w.printed, le, '-', false)
		w.afterLeft--
	}
}

// onlyMatches writes each match of line [ls, le) on a line of its own (-o).
func (w *lineWriter) onlyMatches(ls, le int) {
	out, col, data := &w.j.out, w.r.col, w.data
	for _, mm := range w.r.m.matches(data[ls:le]) {
		w.nameSep(':')
		if w.r.o.lineNumber {
			out.WriteString(col.num(strconv.Itoa(w.lineNo(ls))))
			out.WriteString(col.sep(":"))
		}
		out.WriteString(col.match(string(data[ls+mm[0] : ls+mm[1]])))
		out.WriteByte('\n')
	}
}

// withContext writes selected line [ls, le) with its leading context (and
// the trailing context of the line before), separating groups with "--".
func (w *lineWriter) withContext(ls, le int) {
	w.afterCtx(ls)
	// Leading context: up to ctxB lines before ls, after what was printed.
	start := ls
	for k := 0; k < w.r.ctxB && start > 0; k++ {
		prev := bytes.LastIndexByte(w.data[:start-1], '\n') + 1
		if prev < w.printed {
			break
		}
		start = prev
	}
	if w.r.ctxOn && w.anyPrinted && start > w.printed {
		w.j.out.WriteString(w.r.col.sep("--"))
		w.j.out.WriteByte('\n')
	}
	for start < ls {
		e := lineEnd(w.data, start)
		w.writeLine(start, e, '-', false)
		start = e + 1
	}
	w.writeLine(ls, le, ':', true)
	w.afterLeft = w.r.ctxA
}

// finish writes what -l, -L and -c print once the file is searched.
func (w *lineWriter) finish(count int) {
	o, out := w.r.o, &w.j.out
	switch {
	case o.quiet:
	case o.filesWith:
		if w.j.matched {
			w.r.writeName(out, w.j.display)
		}
	case o.filesWithout:
		if !w.j.matched {
			w.r.writeName(out, w.j.display)
		}
	case o.count:
		w.nameSep(':')
		out.WriteString(strconv.Itoa(count))
		out.WriteByte('\n')
	}
}

func (r *grepRun) writeName(out *bytes.Buffer, name string) {
	out.WriteString(r.col.name(name))
	if r.o.nullSep {
		out.WriteByte(0)
	} else {
		out.WriteByte('\n')
	}
}
