package overlay

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRemoveReadsNothing: removing a lower file the process looked up reads
// none of its contents (one lower Lstat, no open); its Base gets the
// contents it had at the lookup, read when the Bases are asked for if the
// host left it unchanged, else none (unknown: a conflict at sync-back) —
// never the host's edit. Before the change, the removal opened and hashed
// the file (one open at removal).
func TestRemoveReadsNothing(t *testing.T) {
	cases := []struct {
		name               string
		trust              bool
		editBefore, editAt string // the host's edit before the removal, after it
		wantDigest         string // "" with ok "" or the base's
	}{
		{"trusted/unchanged", true, "", "", digestOf("base\n")},
		{"trusted/edited-after", true, "", "host edit, longer\n", ""},
		{"trusted/edited-after-same-size", true, "", "HOST\n", ""},
		{"trusted/edited-before", true, "host edit, longer\n", "", ""},
		{"racy/edited-before-same-size", false, "HOST\n", "", digestOf("base\n")},
		{"racy/edited-after", false, "", "HOST\n", digestOf("base\n")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.trust {
				trustStat(t)
			}
			ov, root, lower := sightOverlay(t, map[string]string{"d/conf": "base\n"})
			edit := func(s string) {
				if s == "" {
					return
				}
				if err := os.WriteFile(filepath.Join(root, "d/conf"), []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := ov.Lstat(bg, vp("d/conf")); err != nil {
				t.Fatal(err)
			}
			edit(c.editBefore)
			lower.lstats.Store(0)
			lower.opens.Store(0)
			// Resolved, as a Dir acts on the path it resolved and decided on.
			if err := ov.Remove(bg, vp("d/conf").Resolved()); err != nil {
				t.Fatal(err)
			}
			if l, o := lower.lstats.Load(), lower.opens.Load(); l != 1 || o != 0 {
				t.Errorf("the removal made %d lower Lstats and %d opens; want 1 and 0", l, o)
			}
			edit(c.editAt)
			b, ok := ov.Bases()["d/conf"]
			if !ok || b.Digest != c.wantDigest || b.Size != 5 || b.Mode != 0o644 || b.Type != 0 {
				t.Errorf("base %+v (recorded %v); want digest %q, size 5, mode 0644", b, ok, c.wantDigest)
			}
			if _, err := ov.Lstat(bg, vp("d/conf")); err == nil {
				t.Error("the removed file is still shown")
			}
		})
	}
}

// TestRemoveSymlinkBase: a removed symlink's Base has the target the
// process saw, read after the removal while the link is unchanged; a link
// the host replaced meanwhile has none (unknown).
func TestRemoveSymlinkBase(t *testing.T) {
	for _, replace := range []bool{false, true} {
		trustStat(t)
		ov, root, _ := sightOverlay(t, map[string]string{"f": "x"})
		if err := os.Symlink("f", filepath.Join(root, "l")); err != nil {
			t.Fatal(err)
		}
		if _, err := ov.Lstat(bg, vp("l")); err != nil {
			t.Fatal(err)
		}
		if err := ov.Remove(bg, vp("l")); err != nil {
			t.Fatal(err)
		}
		want := "f"
		if replace {
			want = ""
			os.Remove(filepath.Join(root, "l"))
			if err := os.Symlink("elsewhere", filepath.Join(root, "l")); err != nil {
				t.Fatal(err)
			}
		}
		if b := ov.Bases()["l"]; b.Target != want || b.Type != os.ModeSymlink {
			t.Errorf("replaced %v: base %+v; want target %q", replace, b, want)
		}
	}
}
