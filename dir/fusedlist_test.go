package dir_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/internal/testenv"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

// Listings with a policy resolve, decide and list in one backend call
// (vfs.ResolveReadDir). These tests hold that route to what the unfused route
// promises, as fusedread_test.go does for reads.

// listVia lists name through d: its entries' names and types, comma-separated.
func listVia(d *dir.Dir, name string) (string, error) {
	ents, err := d.ReadDir(bg, name)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, e := range ents {
		b.WriteString(e.Name())
		if e.IsDir() {
			b.WriteByte('/')
		}
		b.WriteByte(',')
	}
	return b.String(), nil
}

func TestFusedListMatchesPlain(t *testing.T) {
	eachFusedTree(t, "..", func(t *testing.T, plain, pol *dir.Dir, prefix string) {
		for _, name := range []string{"work", "lw", "lw/sub", "work/sub/up", "work/sub/up/sub", "work/", "lf", "dangling", "nope", "nope/x", "work/f.txt", "work/f.txt/x", "protected", "work/sub"} {
			name = prefix + name
			want, werr := listVia(plain, name)
			got, gerr := listVia(pol, name)
			wantSameAnswer(t, "ReadDir("+name+")", name, got, want, gerr, werr)
		}
	})
}

// TestFusedListRefusesWhereItLeads: through a link to the root or to the hidden
// directory itself, listing the hidden directory, or a name beneath it that
// exists, is missing or runs through a file, answers fs_permission_denied, and
// is audited as denied.
func TestFusedListRefusesWhereItLeads(t *testing.T) {
	for _, ab := range aliasBackends {
		t.Run(ab.name, func(t *testing.T) {
			b := ab.new(t)
			host := plant(t, b)
			must(t, host.MkdirAll(bg, "vault/inner"))
			must(t, host.WriteFile(bg, "vault/id", []byte("KEY"), 0o644))
			must(t, host.Symlink(bg, ".", "up"))
			must(t, host.Symlink(bg, "vault", "lv"))
			rec := audit.NewRing(64)
			guest, _ := dir.New(b, dir.WithPolicy(secretPolicy(t)), dir.WithAudit(rec))
			for _, name := range []string{"up/vault", "lv", "lv/inner", "up/vault/inner", "up/vault/missing", "up/vault/missing/x", "up/vault/id", "up/vault/id/x", "work/../lv"} {
				if got, err := listVia(guest, name); vfs.CodeOf(err) != vfs.CodePermission {
					t.Errorf("ReadDir(%s): %q, %v; want fs_permission_denied", name, got, err)
				}
			}
			for _, ev := range rec.Events() {
				if ev.Outcome != audit.Denied {
					t.Errorf("audit: %s %s (as %s) recorded %s, want denied", ev.Op, ev.Path, ev.GuestPath, ev.Outcome)
				}
			}
		})
	}
}

// TestFusedListSwapAfterDecision: between the decision on d (a decoy) and the
// listing, a hook makes d a link to vault: the listing shows the decoy's names
// or fails, never the vault's.
func TestFusedListSwapAfterDecision(t *testing.T) {
	for _, ab := range aliasBackends {
		t.Run(ab.name, func(t *testing.T) {
			b := ab.new(t)
			host := plant(t, b)
			must(t, host.MkdirAll(bg, "d"))
			must(t, host.WriteFile(bg, "d/decoy", []byte("decoy"), 0o644))
			must(t, host.MkdirAll(bg, "vault"))
			must(t, host.WriteFile(bg, "vault/key-name", []byte("KEY"), 0o644))
			guest, _ := dir.New(b, dir.WithPolicy(secretPolicy(t)), dir.WithHooks(swapToVault(t, host, policy.OpList, "d")))
			got, err := listVia(guest, "d")
			if strings.Contains(got, "key-name") {
				t.Fatalf("listed the vault through a link swapped in after the decision: %q", got)
			}
			if err == nil && got != "decoy," {
				t.Fatalf("listed %q, want the decoy's names", got)
			}
		})
	}
}

// TestFusedListRace: a host exchanges a directory with a link to a directory
// the policy hides, as fast as it can, while a guest lists the directory's name:
// every listing shows the real directory's names or fails; none shows the hidden
// one's (a listing that followed the link after deciding on the name would).
func TestFusedListRace(t *testing.T) {
	for _, mode := range []physical.ResolverMode{physical.ResolverAuto, physical.ResolverPortable} {
		t.Run(map[physical.ResolverMode]string{physical.ResolverAuto: "openat2", physical.ResolverPortable: "portable"}[mode], func(t *testing.T) {
			root := t.TempDir()
			for name, body := range map[string]string{"d/open-name": "x", "vault/key-name": "KEY"} {
				must(t, os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755))
				must(t, os.WriteFile(filepath.Join(root, name), []byte(body), 0o644))
			}
			must(t, os.Symlink("vault", filepath.Join(root, "lnk")))
			b, err := physical.New(root, physical.WithResolver(mode))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			guest, _ := dir.New(b, dir.WithPolicy(secretPolicy(t)))
			listed, refused := 0, 0
			testenv.Exchanging(t, root, [][2]string{{"d", "lnk"}}, func() {
				for range 3000 {
					got, err := listVia(guest, "d")
					if strings.Contains(got, "key-name") {
						t.Fatalf("a listing of d showed the hidden directory: %q", got)
					}
					if err != nil {
						refused++
					} else {
						listed++
					}
				}
			})
			if listed == 0 {
				t.Errorf("no listing of d succeeded in 3000 (%d refused)", refused)
			}
			t.Logf("%d listings of the directory, %d refused", listed, refused)
		})
	}
}
