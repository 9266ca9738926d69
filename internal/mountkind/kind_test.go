package mountkind

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/capfs/capfs/vfs"
)

// TestList: all six kinds are registered, in help order.
func TestList(t *testing.T) {
	var names []string
	for _, k := range List() {
		names = append(names, k.Name)
		if k.Usage == "" || k.Help == "" || k.Open == nil {
			t.Errorf("kind %s: usage %q, help %q, open %v", k.Name, k.Usage, k.Help, k.Open != nil)
		}
		if k.Parse == nil && (k.Flag == nil || k.Config == nil) {
			t.Errorf("kind %s cannot parse both forms", k.Name)
		}
	}
	want := []string{"physical", "git", "memory", "agentfs", "cas", "sqlite"}
	if !slices.Equal(names, want) {
		t.Fatalf("kinds %v, want %v", names, want)
	}
	if got := NameList(); got != "physical, git, memory, agentfs, cas or sqlite" {
		t.Errorf("NameList() = %q", got)
	}
	if got := UsageList(); got != "physical:HOSTDIR, git:REPO[@REV], memory:[,quota=SIZE], agentfs:FILE (read-only), cas:DIGEST|NAME[,store=DIR], sqlite:FILE[,quota=SIZE][,sync=normal|full|off]" {
		t.Errorf("UsageList() = %q", got)
	}
}

// TestTraits: each question has one kind that answers yes, and a Spec
// answers it from its kind, not its name alone.
func TestTraits(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		spec                                      Spec
		workTree, revision, ephemeral, persistent bool
		hostDir                                   string
	}{
		{Spec{Kind: "physical", Host: dir}, true, false, false, false, dir},
		{Spec{Kind: "physical"}, false, false, false, false, ""},
		{Spec{Kind: "git", Host: dir, Rev: "HEAD"}, false, true, false, false, dir},
		{Spec{Kind: "memory"}, false, false, true, false, ""},
		{Spec{Kind: "sqlite", Host: dir + "/x.db"}, false, false, false, true, ""},
		{Spec{Kind: "agentfs", Host: dir + "/x.db"}, false, false, false, false, ""},
		{Spec{Kind: "cas", Source: "root"}, false, false, false, false, ""},
		{Spec{Kind: "nosuch", Host: dir}, false, false, false, false, ""},
	} {
		s := tc.spec
		if s.WorkTree() != tc.workTree || s.Revision() != tc.revision || s.Ephemeral() != tc.ephemeral ||
			s.Persistent() != tc.persistent || s.HostDir() != tc.hostDir {
			t.Errorf("%+v: WorkTree %v, Revision %v, Ephemeral %v, Persistent %v, HostDir %q", s,
				s.WorkTree(), s.Revision(), s.Ephemeral(), s.Persistent(), s.HostDir())
		}
	}
}

// TestParseFlag: each kind's --mount form and messages (as cmd/capfs
// printed them before the kinds moved here).
func TestParseFlag(t *testing.T) {
	inTempDir(t)
	p := vfs.MustParse("p")
	for _, tc := range []struct{ arg, err string }{
		{"", "missing kind: want PATH=KIND:ARG with KIND physical, git, memory, agentfs, cas or sqlite"},
		{"nfs:x", `unknown kind "nfs" (want physical, git, memory, agentfs, cas or sqlite)`},
		{"physical:", "physical needs a host directory: PATH=physical:HOSTDIR"},
		{"physical:d,quota=1M", "d,quota=1M: no such directory"},
		{"git:", "git needs a repository: PATH=git:REPO[@REV]"},
		{"memory:x", "memory takes no argument: PATH=memory:[,quota=SIZE]"},
		{"memory:,zz", `unknown option "zz" (want ro, rw or quota=SIZE)`},
		{"memory:,quota=5Q", `quota=5Q: unknown unit "Q" (want K, M, G or T, binary)`},
		{"cas:", "cas needs a root digest or name (want PATH=cas:DIGEST|NAME[,store=DIR])"},
		{"cas:r,store=", "store=: empty store directory"},
		{"sqlite:x.db,sync=x", `sync=x: sync="x": want normal, full or off`},
		{"agentfs:nosuch", "nosuch: no such file (want PATH=agentfs:FILE (read-only))"},
	} {
		if _, err := ParseFlag(p, tc.arg, ""); err == nil || err.Error() != tc.err {
			t.Errorf("ParseFlag(%q) = %v, want %q", tc.arg, err, tc.err)
		}
	}
}

// TestParseFlagForms: what each form fills in.
func TestParseFlagForms(t *testing.T) {
	dir := inTempDir(t)
	p := vfs.MustParse("p")
	s, err := ParseFlag(p, "git:d@v1,ro", "")
	if err != nil || !s.Revision() || s.Rev != "v1" || s.Host != filepath.Join(dir, "d") || !s.ReadOnly {
		t.Errorf("git:d@v1 = %+v, %v", s, err)
	}
	s, err = ParseFlag(p, "memory:,quota=1M,ro", "")
	if err != nil || s.Quota != 1<<20 || !s.ReadOnly || !s.Ephemeral() {
		t.Errorf("memory:,quota=1M,ro = %+v, %v", s, err)
	}
	s, err = ParseFlag(p, "cas:root,store=st", "")
	if err != nil || s.Opts["store"] != "st" || !s.ReadOnly {
		t.Errorf("cas:root,store=st = %+v, %v", s, err)
	}
}

// TestParseConfig: the configuration file's form, relative to its
// directory, and its messages.
func TestParseConfig(t *testing.T) {
	base := t.TempDir()
	if err := os.Mkdir(filepath.Join(base, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := vfs.MustParse("p")
	for _, tc := range []struct {
		c   Config
		err string
	}{
		{Config{}, "missing kind (physical, git, memory, agentfs, cas or sqlite)"},
		{Config{Kind: "physical"}, "physical needs source"},
		{Config{Kind: "physical", Source: "d", Rev: "x"}, "rev applies to git mounts only"},
		{Config{Kind: "git"}, "git needs source"},
		{Config{Kind: "memory", Rev: "x"}, "memory takes no source or rev"},
		{Config{Kind: "memory", Quota: "x"}, `quota = "x": want a size such as 64MiB, 1GiB or 1048576, or none`},
		{Config{Kind: "sqlite", Source: "x.db", Quota: "1M"}, "quota applies to memory mounts only"},
	} {
		if _, err := ParseConfig(p, tc.c, "c.toml", base); err == nil || err.Error() != tc.err {
			t.Errorf("ParseConfig(%+v) = %v, want %q", tc.c, err, tc.err)
		}
	}
	s, err := ParseConfig(p, Config{Kind: "git", Source: "d"}, "c.toml", base)
	if err != nil || s.Host != filepath.Join(base, "d") || s.Rev != "HEAD" || !s.ReadOnly || s.Origin != "c.toml" {
		t.Errorf("git config = %+v, %v", s, err)
	}
	s, err = ParseConfig(p, Config{Kind: "sqlite", Source: "x.db"}, "c.toml", base)
	if err != nil || s.Host != filepath.Join(base, "x.db") || !s.Persistent() {
		t.Errorf("sqlite config = %+v, %v", s, err)
	}
}

// TestOpen: a memory mount without a quota takes the session's; an unknown
// kind is refused.
func TestOpen(t *testing.T) {
	s := Spec{Path: vfs.MustParse("tmp"), Kind: "memory"}
	if _, err := Open(context.Background(), &s, Env{MemoryQuota: 4096}); err != nil || s.Quota != 4096 {
		t.Errorf("memory: quota %d, %v", s.Quota, err)
	}
	s = Spec{Kind: "memory", Quota: -1}
	if _, err := Open(context.Background(), &s, Env{MemoryQuota: 4096}); err != nil || s.Quota != -1 {
		t.Errorf("memory without limit: quota %d, %v", s.Quota, err)
	}
	s = Spec{Kind: "physical", Host: t.TempDir(), Source: "."}
	b, err := Open(context.Background(), &s, Env{})
	if err != nil || b == nil {
		t.Errorf("physical: %v", err)
	}
	if _, err := Open(context.Background(), &Spec{Kind: "nosuch"}, Env{}); err == nil || err.Error() != `unknown kind "nosuch"` {
		t.Errorf("nosuch: %v", err)
	}
}

// TestRegisterTwice: a name is registered once.
func TestRegisterTwice(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a second registration of memory did not panic")
		}
	}()
	Register(&Kind{Name: "memory"})
}

// inTempDir makes a temporary directory holding a directory d the current
// one, and returns it.
func inTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("d", 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
