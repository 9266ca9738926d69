package main

import (
	"strings"
	"testing"

	"github.com/capfs/capfs/internal/mountkind"
	"github.com/capfs/capfs/vfs"
)

// FuzzParseMountFlag checks the --mount parser on arbitrary input: it never
// panics, fails only with a usage error that echoes the flag, and what it accepts
// is a valid mount: a clean namespace path, a registered kind, a work tree
// with its host directory, a git revision always read-only, a memory mount
// without a source, a host directory only for work trees and revisions.
func FuzzParseMountFlag(f *testing.F) {
	for _, s := range []string{
		"project=physical:.", "p=physical:.,ro", "p=physical:.,rw,ro", "ref/head=git:.@HEAD", "g=git:.",
		"tmp=memory:", "tmp=memory:,ro", "=memory:", "../x=memory:", "a/../b=memory:", "/abs=memory:",
		"p", "p=", "p=nfs:x", "p=physical:", "p=memory:x", "a\\b=memory:", "a\x00b=memory:", "p=physical:.,ro,",
		"s=cas:root", "s=cas:root,store=", "s=sqlite:x.db,quota=1M", "s=sqlite:x.db,sync=no", "a=agentfs:nosuch", "a=agentfs:",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		spec, err := parseMountFlag(arg, "")
		if err != nil {
			if exitCodeOf(err) != exitUsage {
				t.Fatalf("parseMountFlag(%q): exit code %d, want %d", arg, exitCodeOf(err), exitUsage)
			}
			if !strings.HasPrefix(err.Error(), "--mount "+arg+": ") {
				t.Fatalf("parseMountFlag(%q): error %q does not echo the flag", arg, err)
			}
			return
		}
		again, perr := vfs.ParseGuest(spec.Path.String())
		if perr != nil || !again.Equal(spec.Path) {
			t.Fatalf("parseMountFlag(%q): path %q does not round-trip: %v", arg, spec.Path, perr)
		}
		checkMountKind(t, arg, spec)
	})
}

// checkMountKind checks what spec's kind promises: a work tree has its host
// directory, a git revision is read-only, a memory mount has no source, and
// only those two have a host directory.
func checkMountKind(t *testing.T, arg string, spec mountSpec) {
	t.Helper()
	k := mountkind.Lookup(spec.Kind)
	switch {
	case k == nil:
		t.Fatalf("parseMountFlag(%q): kind %q", arg, spec.Kind)
	case k.WorkTree && !spec.WorkTree():
		t.Fatalf("parseMountFlag(%q): work tree mount without a host path %+v", arg, spec)
	case k.Revision && (!spec.ReadOnly || !spec.Revision() || spec.Rev == ""):
		t.Fatalf("parseMountFlag(%q): git mount %+v", arg, spec)
	case k.Ephemeral && (spec.Host != "" || spec.Source != ""):
		t.Fatalf("parseMountFlag(%q): memory mount with a source %+v", arg, spec)
	case !k.WorkTree && !k.Revision && spec.HostDir() != "":
		t.Fatalf("parseMountFlag(%q): host directory of a %s mount %+v", arg, spec.Kind, spec)
	}
}
