package main

import (
	"strings"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// FuzzParseMountFlag checks the --mount parser on arbitrary input: it never
// panics, fails only with a usage error that echoes the flag, and what it accepts
// is a valid mount: a clean namespace path, a known kind, a git mount always
// read-only, a host path only for physical and git mounts.
func FuzzParseMountFlag(f *testing.F) {
	for _, s := range []string{
		"project=physical:.", "p=physical:.,ro", "p=physical:.,rw,ro", "ref/head=git:.@HEAD", "g=git:.",
		"tmp=memory:", "tmp=memory:,ro", "=memory:", "../x=memory:", "a/../b=memory:", "/abs=memory:",
		"p", "p=", "p=nfs:x", "p=physical:", "p=memory:x", "a\\b=memory:", "a\x00b=memory:", "p=physical:.,ro,",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		spec, err := parseMountFlag(arg)
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
		switch spec.Kind {
		case kindPhysical:
			if spec.Host == "" {
				t.Fatalf("parseMountFlag(%q): physical mount without a host path", arg)
			}
		case kindGit:
			if !spec.ReadOnly || spec.Host == "" || spec.Rev == "" {
				t.Fatalf("parseMountFlag(%q): git mount %+v", arg, spec)
			}
		case kindMemory:
			if spec.Host != "" || spec.Source != "" {
				t.Fatalf("parseMountFlag(%q): memory mount with a source %+v", arg, spec)
			}
		default:
			t.Fatalf("parseMountFlag(%q): kind %q", arg, spec.Kind)
		}
	})
}
