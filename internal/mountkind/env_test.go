package mountkind

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/vfs"
)

// envOf is an Env whose variables are vars, and only those.
func envOf(vars map[string]string) Env {
	return Env{Getenv: func(k string) string { return vars[k] }}
}

// TestParseFlagDir: a relative host path of --mount is taken from the
// directory given, not from the process's current directory.
func TestParseFlagDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := vfs.MustParse("m")
	for _, arg := range []string{"physical:sub", "git:sub@main"} {
		s, err := ParseFlag(p, arg, dir)
		if err != nil || s.Host != filepath.Join(dir, "sub") {
			t.Errorf("ParseFlag(%q, dir) = host %q, %v; want %s", arg, s.Host, err, filepath.Join(dir, "sub"))
		}
	}
	if _, err := ParseFlag(p, "physical:nope", dir); err == nil || !strings.Contains(err.Error(), "nope: no such directory") {
		t.Errorf("ParseFlag of a missing directory: %v", err)
	}
	s, err := ParseFlag(p, "sqlite:s.db", dir)
	if err != nil || s.Host != filepath.Join(dir, "s.db") || s.Source != "s.db" {
		t.Errorf("ParseFlag(sqlite:s.db, dir) = %+v, %v", s, err)
	}
	s, err = ParseFlag(p, "cas:root,store=st", dir)
	if err != nil || s.Opts["store"] != filepath.Join(dir, "st") {
		t.Errorf("ParseFlag(cas:root,store=st, dir) = %+v, %v", s, err)
	}
}

// TestEnvGetenv: the kinds read their environment variables through
// Env.Getenv, not the process's environment.
func TestEnvGetenv(t *testing.T) {
	if m, err := physicalResolver(envOf(map[string]string{"CAPFS_PHYSICAL_RESOLVER": "portable"})); err != nil || m != physical.ResolverPortable {
		t.Errorf("physicalResolver(portable) = %v, %v", m, err)
	}
	spec := Spec{Path: vfs.MustParse("p"), Kind: "physical", Source: ".", Host: t.TempDir()}
	if _, err := Open(context.Background(), &spec, envOf(map[string]string{"CAPFS_PHYSICAL_RESOLVER": "bogus"})); err == nil || !strings.Contains(err.Error(), "CAPFS_PHYSICAL_RESOLVER") {
		t.Errorf("a physical mount opened with CAPFS_PHYSICAL_RESOLVER=bogus: %v", err)
	}
	for _, tc := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"CAPFS_CAS_STORE": "/s", "XDG_CACHE_HOME": "/c", "HOME": "/h"}, "/s"},
		{map[string]string{"XDG_CACHE_HOME": "/c", "HOME": "/h"}, "/c/capfs/cas"},
		{map[string]string{"HOME": "/h"}, "/h/.cache/capfs/cas"},
	} {
		if d, err := casStoreDir("", envOf(tc.vars)); err != nil || d != tc.want {
			t.Errorf("casStoreDir in %v = %q, %v; want %s", tc.vars, d, err, tc.want)
		}
	}
	if _, err := casStoreDir("", envOf(nil)); err == nil {
		t.Error("casStoreDir without HOME or XDG_CACHE_HOME found a store")
	}
	data := t.TempDir()
	f, err := ScratchFile("/some/project", envOf(map[string]string{"XDG_DATA_HOME": data}))
	if err != nil || !strings.HasPrefix(f, filepath.Join(data, "capfs", "scratch", "project-")) {
		t.Errorf("ScratchFile under XDG_DATA_HOME=%s: %q, %v", data, f, err)
	}
	home := t.TempDir()
	f, err = ScratchFile("/some/project", envOf(map[string]string{"HOME": home}))
	if err != nil || !strings.HasPrefix(f, filepath.Join(home, ".local", "share", "capfs", "scratch")+"/") {
		t.Errorf("ScratchFile with HOME=%s only: %q, %v", home, f, err)
	}
}
