package dir_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// The README's tour: compose a namespace, grant a Dir, attenuate it, revoke it.
func Example() {
	ctx := context.Background()

	// The host composes a namespace out of backends.
	ns := vfs.NewNamespace()
	_ = ns.Mount(vfs.MustParse("project"), memory.New(), vfs.MountOptions{})
	_ = ns.Mount(vfs.MustParse("ref"), memory.New(), vfs.MountOptions{ReadOnly: true})
	_ = ns.Mount(vfs.MustParse("tmp"), memory.New(memory.WithQuota(64<<20)), vfs.MountOptions{})

	// ...and takes the root capability plus its control facet.
	trail := audit.NewRing(1024)
	root, control := dir.New(ns, dir.WithSubject("agent-42"), dir.WithAudit(trail))
	_ = root.MkdirAll(ctx, "project/src")
	_ = root.WriteFile(ctx, "project/src/main.go", []byte("package main\n"), 0o644)

	// Attenuate: read-only, scoped to project/src. One-way and chainable.
	src, _ := root.ReadOnly().Sub(ctx, "project/src")
	body, _ := src.ReadFile(ctx, "/main.go") // "/" is the guest's own root
	fmt.Printf("%q\n", body)
	matches, _ := src.Glob(ctx, "**/*.go")
	fmt.Println(matches)

	err := src.WriteFile(ctx, "x", nil, 0o644)
	fmt.Println(vfs.CodeOf(err), errors.Is(err, fs.ErrPermission))
	_, err = src.ReadFile(ctx, "../../etc")
	fmt.Println(vfs.CodeOf(err))

	// Grant a subtree with its own control, then revoke it.
	tmp, _ := control.Child(ctx, "tmp")
	guest := tmp.Dir()
	fmt.Println(guest.WriteFile(ctx, "notes", []byte("hi"), 0o644))
	tmp.Revoke()
	_, err = guest.ReadFile(ctx, "notes")
	fmt.Println(vfs.CodeOf(err))

	// Standard interfaces: io/fs view of any capability.
	_ = fs.WalkDir(src.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		fmt.Println("walk:", p)
		return err
	})
	// One event per call: 7 by the host and src, 1 for the Child (a Sub), 2 by
	// the guest, 2 by WalkDir (a Stat of "." and one ReadDir).
	fmt.Println("audit events:", trail.Total())

	// Output:
	// "package main\n"
	// [main.go]
	// read_only true
	// path_outside_sandbox
	// <nil>
	// revoked
	// walk: .
	// walk: main.go
	// audit events: 12
}
