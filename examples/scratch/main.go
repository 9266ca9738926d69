// Command scratch shows capfs's capability model on in-memory storage: a host
// composes a namespace of memory mounts, grants a guest a read-only view of one
// subtree, and watches the guest's refused write, a revocation, and the Help text a
// model would read. Every guest call lands in the audit trail printed at the end.
//
// Run it with `make demo` or `go run ./examples/scratch`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scratch:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	fmt := printer{out}
	// --- The host composes a namespace: a project tree and a scratch area. ---
	project := memory.New()
	scratch := memory.New(memory.WithQuota(1 << 20)) // 1 MiB of scratch space

	ns := vfs.NewNamespace()
	if err := ns.Mount(vfs.MustParse("project"), project, vfs.MountOptions{}); err != nil {
		return err
	}
	if err := ns.Mount(vfs.MustParse("tmp"), scratch, vfs.MountOptions{}); err != nil {
		return err
	}

	trail := audit.NewRing(256)
	root, control := dir.New(ns, dir.WithSubject("agent-42"), dir.WithAudit(trail))

	// The host seeds the project through its own, unattenuated Dir.
	for name, body := range map[string]string{
		"project/README.md":       "# demo project\n",
		"project/src/main.go":     "package main\n\nfunc main() {}\n",
		"project/src/lib/util.go": "package lib\n",
		"project/docs/guide.md":   "How to use the demo.\n",
	} {
		if err := root.MkdirAll(ctx, parentOf(name)); err != nil {
			return err
		}
		if err := root.WriteFile(ctx, name, []byte(body), 0o644); err != nil {
			return err
		}
	}

	fmt.Println("== The guest's view of the whole namespace ==")
	names, err := root.List(ctx, "/")
	if err != nil {
		return err
	}
	fmt.Println("  /:", strings.Join(names, ", "))

	// --- Grant: a read-only capability to project/src, and nothing else. ---
	src, err := root.ReadOnly().Sub(ctx, "project/src")
	if err != nil {
		return err
	}
	fmt.Println("\n== Granted: read-only Sub(\"project/src\") ==")
	matches, err := src.Glob(ctx, "**/*.go")
	if err != nil {
		return err
	}
	fmt.Println("  Glob(\"**/*.go\"):", matches)
	body, err := src.ReadFile(ctx, "/main.go") // "/" is the guest's own root: project/src
	if err != nil {
		return err
	}
	fmt.Printf("  ReadFile(\"/main.go\"): %q\n", body)

	// The guest tries to write, and to climb out.
	err = src.WriteFile(ctx, "main.go", []byte("evil"), 0o644)
	fmt.Println("  WriteFile(\"main.go\") ->", err)
	fmt.Println("    read-only?", errors.Is(err, vfs.ErrReadOnly), " fs.ErrPermission?", errors.Is(err, fs.ErrPermission))
	_, err = src.ReadFile(ctx, "../README.md")
	fmt.Println("  ReadFile(\"../README.md\") ->", err)

	// --- Scratch: a writable Sub of tmp, revocable through its own Control. ---
	tmpControl, err := control.Child(ctx, "tmp")
	if err != nil {
		return err
	}
	work := tmpControl.Dir()
	if err := work.WriteFile(ctx, "notes.txt", []byte("draft 1\n"), 0o644); err != nil {
		return err
	}
	if err := work.Append(ctx, "notes.txt", []byte("draft 2\n")); err != nil {
		return err
	}
	notes, _ := work.ReadFile(ctx, "notes.txt")
	fmt.Printf("\n== Scratch Dir (tmp) ==\n  notes.txt: %q\n", notes)

	tmpControl.Revoke()
	_, err = work.ReadFile(ctx, "notes.txt")
	fmt.Println("  after Revoke(): ReadFile ->", err, " revoked?", errors.Is(err, vfs.ErrRevoked))
	// The rest of the grant still works.
	if _, err := src.Stat(ctx, "main.go"); err != nil {
		return err
	}
	fmt.Println("  the src grant is unaffected: Stat(\"main.go\") ok")

	// --- What a model reads to learn the API. ---
	help := src.Help()
	fmt.Println("\n== src.Help() (first lines) ==")
	for i, line := range strings.SplitN(help, "\n", 9) {
		if i == 8 {
			break
		}
		fmt.Println("  " + line)
	}

	fmt.Println("\n== Audit trail (one event per guest call) ==")
	for _, e := range trail.Events() {
		path := e.Path
		if path == "" { // the path did not parse: show what the guest wrote
			path = e.GuestPath
		}
		line := fmt.Sprintf("  %-7s %-8s %-28s %s", e.Op, e.Outcome, path, e.Code)
		fmt.Println(strings.TrimRight(line, " "))
	}
	return nil
}

func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "."
}

// printer writes the demo's output to w with fmt-like calls.
type printer struct{ w io.Writer }

func (p printer) Println(a ...any)               { fmt.Fprintln(p.w, a...) }
func (p printer) Printf(format string, a ...any) { fmt.Fprintf(p.w, format, a...) }
func (p printer) Sprintf(format string, a ...any) string {
	return fmt.Sprintf(format, a...)
}
