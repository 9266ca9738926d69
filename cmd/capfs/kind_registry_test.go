package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/internal/mountkind"
	"github.com/capfs/capfs/vfs"
)

// The fake kind is a registered kind for the registry's own tests: "fake:NAME" with
// an option ",size=N"; NAME "fail" fails to open.
var _ = mountkind.Register(&mountkind.Kind{
	Name:  "fake",
	Usage: "fake:NAME[,size=N]",
	Option: func(spec *mountSpec, opt string) (bool, error) {
		v, ok := strings.CutPrefix(opt, "size=")
		if !ok {
			return false, nil
		}
		if v == "" {
			return false, errors.New("empty size")
		}
		if spec.Opts == nil {
			spec.Opts = map[string]string{}
		}
		spec.Opts["size"] = v
		return true, nil
	},
	Parse: func(spec *mountSpec, arg, base string) error {
		if arg == "" {
			return errors.New("fake needs a name")
		}
		spec.Source = arg
		if base != "" {
			spec.Host = filepath.Join(base, arg)
		}
		return nil
	},
	Open: func(_ context.Context, spec *mountSpec, _ mountkind.Env) (vfs.Backend, error) {
		if spec.Source == "fail" {
			return nil, vfs.NewError(vfs.CodeIO, "open", vfs.Path{}, "cannot open")
		}
		return memory.New(), nil
	},
})

// TestMountKindRegistry: a registered kind's --mount form, its options, and
// the kinds an unknown kind's message lists.
func TestMountKindRegistry(t *testing.T) {
	spec, err := parseMountFlag("x=fake:one,size=3,ro", "")
	if err != nil {
		t.Fatal(err)
	}
	if spec.Kind != "fake" || spec.Source != "one" || !spec.ReadOnly || spec.Opts["size"] != "3" {
		t.Fatalf("parsed %+v", spec)
	}
	// An option the kind does not know stays part of the argument.
	spec, err = parseMountFlag("x=fake:a,b", "")
	if err != nil || spec.Source != "a,b" {
		t.Fatalf("got %+v, %v", spec, err)
	}
	for _, bad := range []string{"x=fake:", "x=fake:a,size=", "x=nosuch:a"} {
		if _, err := parseMountFlag(bad, ""); err == nil {
			t.Errorf("%s: accepted", bad)
		} else if bad == "x=nosuch:a" && !strings.Contains(err.Error(), "fake") {
			t.Errorf("%s: error does not list the registered kind: %v", bad, err)
		}
	}
}

// TestMountKindRegistryOpen: a registered kind opens through openMount, and
// its failure is the mount's.
func TestMountKindRegistryOpen(t *testing.T) {
	spec, err := parseMountFlag("x=fake:one", "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := openMount(spec, 0)
	if err != nil || m.Backend == nil {
		t.Fatalf("open: %v", err)
	}
	if _, err := openMount(mountSpec{Path: vfs.MustParse("x"), Kind: "fake", Source: "fail", Origin: "--mount"}, 0); err == nil {
		t.Fatal("open of a failing mount succeeded")
	}
}

// TestMountKindRegistryConfig: a registered kind's source in the
// configuration file is relative to the file's directory.
func TestMountKindRegistryConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "capfs.toml")
	if err := os.WriteFile(cfg, []byte("[[mount]]\npath = \"s\"\nkind = \"fake\"\nsource = \"rel\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := loadConfig(environ{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.mounts) != 1 || res.mounts[0].Host != filepath.Join(filepath.Dir(cfg), "rel") {
		t.Fatalf("config mounts %+v", res.mounts)
	}
	if err := os.WriteFile(cfg, []byte("[[mount]]\npath = \"s\"\nkind = \"fake\"\nsource = \"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(environ{}, cfg); err == nil {
		t.Fatal("config mount without a source accepted")
	}
}

// The fakescratch kind has the traits of memory under another name: what
// the command line says of a mount follows its traits.
var _ = mountkind.Register(&mountkind.Kind{
	Name:   "fakescratch",
	Usage:  "fakescratch:",
	Traits: mountkind.Traits{Ephemeral: true},
	Parse:  func(*mountSpec, string, string) error { return nil },
	Open: func(context.Context, *mountSpec, mountkind.Env) (vfs.Backend, error) {
		return memory.New(), nil
	},
})

// TestMountTraitsDecide: the mounts tool describes a mount by its kind's
// traits, not its kind's name (that a scratch mount has no project cache:
// TestScratchHasNoProjectCache, Linux-only as capfs run's caches are).
func TestMountTraitsDecide(t *testing.T) {
	spec, err := parseMountFlag("s=fakescratch:", "")
	if err != nil {
		t.Fatal(err)
	}
	m := &mounted{mountSpec: spec, Backend: memory.New()}
	m.Quota = 1 << 20
	mi := mcpMountInfo(m, false)
	if mi.Backend != "fakescratch" || !strings.HasPrefix(mi.Note, "in memory: gone when the server exits; quota 1MiB") {
		t.Errorf("mount info %+v", mi)
	}
}
