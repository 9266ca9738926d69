//go:build linux

package buildcache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// env is a getenv of the variables given.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// TestRoot: the root comes from the getenv given, never the process's:
// $CAPFS_CACHE_DIR, else an absolute $XDG_CACHE_HOME/capfs, else
// $HOME/.cache/capfs; it is made 0700, and one writable by others is refused.
func TestRoot(t *testing.T) {
	t.Parallel()
	top := t.TempDir()
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"CAPFS_CACHE_DIR": top + "/c", "XDG_CACHE_HOME": top + "/x", "HOME": top + "/h"}, top + "/c"},
		{map[string]string{"XDG_CACHE_HOME": top + "/x", "HOME": top + "/h"}, top + "/x/capfs"},
		{map[string]string{"XDG_CACHE_HOME": "relative", "HOME": top + "/h"}, top + "/h/.cache/capfs"},
	} {
		got, err := Root(env(c.vars))
		if err != nil || got != c.want {
			t.Errorf("Root(%v) = %q, %v; want %q", c.vars, got, err, c.want)
			continue
		}
		if st, err := os.Stat(got); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v", got, st.Mode(), err)
		}
	}
	if _, err := Root(env(nil)); err == nil {
		t.Error("a root without $HOME")
	}
	open := filepath.Join(top, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Root(env(map[string]string{"CAPFS_CACHE_DIR": open})); err == nil {
		t.Error("a root writable by others was accepted")
	}
}

// TestMax: $CAPFS_CACHE_MAX as getenv has it, else the default for a
// missing, bad or zero one.
func TestMax(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]int64{"": DefaultMax, "1G": 1 << 30, "junk": DefaultMax, "0": DefaultMax} {
		if got := Max(env(map[string]string{"CAPFS_CACHE_MAX": v})); got != want {
			t.Errorf("Max(%q) = %d, want %d", v, got, want)
		}
	}
}

// TestKey: a project's key names a cache directory IsName accepts, the same
// for the same project and another for another.
func TestKey(t *testing.T) {
	t.Parallel()
	a, b := Key("physical:/src/a"), Key("git:/src/a")
	if !IsName(Name(a)) || !IsName(Name(b)) || Name(a) == Name(b) || Key("physical:/src/a") != a {
		t.Errorf("keys %q, %q", a, b)
	}
	if !strings.HasSuffix(a, "|physical:/src/a") {
		t.Errorf("key %q does not name its project", a)
	}
	for _, n := range []string{"cas", "gitscan", "0123456789abcdeF", "0123456789abcde", "0123456789abcdef0"} {
		if IsName(n) {
			t.Errorf("IsName(%q)", n)
		}
	}
}

// TestMountsListRemove: Mounts makes the project's cache (a private data
// directory with each tool's directory, bound at Target with the tools'
// environment) and notes its project and use; List shows it and only it
// (not the root's other directories); Remove removes it, read-only
// directories in it included.
func TestMountsListRemove(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "gitscan"), 0o700); err != nil {
		t.Fatal(err)
	}
	key := Key("physical:/src/p")
	ms, err := Mounts(root, key)
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(root, Name(key), "data")
	if len(ms) != 1 || ms[0].Source != data || ms[0].Target != Target || len(ms[0].Env) != len(cacheEnv) {
		t.Fatalf("Mounts = %+v", ms)
	}
	if st, err := os.Stat(filepath.Join(data, "go-build")); err != nil || !st.IsDir() {
		t.Fatalf("no go-build directory: %v", err)
	}
	ro := filepath.Join(data, "go-build", "ro")
	if err := os.Mkdir(ro, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ro, "f"), []byte("12345"), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	cs, err := List(root)
	if err != nil || len(cs) != 1 || cs[0].Name != Name(key) || cs[0].Size != 5 || cs[0].Project != "physical:/src/p" || cs[0].LastUsed.IsZero() {
		t.Fatalf("List = %+v, %v", cs, err)
	}
	freed, err := Remove(root, Name(key))
	if err != nil || freed < 5 { // the data and meta.json
		t.Fatalf("Remove = %d, %v", freed, err)
	}
	if names, err := Names(root); err != nil || len(names) != 0 {
		t.Errorf("after Remove: %v, %v", names, err)
	}
}

// TestTrim: past max, the least recently modified files go, down to three
// quarters of max, and setuid bits are stripped; a second Trim within the
// hour does not walk the cache again.
func TestTrim(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	key := Key("git:/src/r")
	if _, err := Mounts(root, key); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(root, Name(key), "data")
	base := time.Now().Add(-time.Hour)
	for i, name := range []string{"old", "mid", "new"} {
		p := filepath.Join(data, name)
		if err := os.WriteFile(p, make([]byte, 100), 0o600); err != nil {
			t.Fatal(err)
		}
		mt := base.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	suid := filepath.Join(data, "new")
	if err := os.Chmod(suid, 0o4700); err != nil {
		t.Fatal(err)
	}
	Trim(root, key, 250) // 300 > 250: down to 187
	if _, err := os.Stat(filepath.Join(data, "old")); err == nil {
		t.Error("the oldest file was kept")
	}
	if _, err := os.Stat(filepath.Join(data, "mid")); err == nil {
		t.Error("the cache was left above three quarters of max")
	}
	st, err := os.Stat(suid)
	if err != nil || st.Mode()&os.ModeSetuid != 0 {
		t.Errorf("the newest file: %v, %v", st.Mode(), err)
	}
	if err := os.WriteFile(filepath.Join(data, "more"), make([]byte, 500), 0o600); err != nil {
		t.Fatal(err)
	}
	Trim(root, key, 250)
	if _, err := os.Stat(filepath.Join(data, "more")); err != nil {
		t.Errorf("a second trim within the hour walked the cache: %v", err)
	}
}
