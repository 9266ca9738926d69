package archive_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/capfs/capfs/archive"
	"github.com/capfs/capfs/archive/archivetest"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

var bg = context.Background()

// snapshot maps every path of d (walked from its root, links not followed) to
// its type, mode, and contents' digest or link target.
func snapshot(t *testing.T, d *dir.Dir) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := d.Walk(bg, ".", func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		v := fi.Mode().String()
		switch {
		case fi.Mode().IsRegular():
			b, err := d.ReadFile(bg, p)
			if err != nil {
				return err
			}
			h := sha256.Sum256(b)
			v += " " + hex.EncodeToString(h[:8])
		case fi.Mode()&fs.ModeSymlink != 0:
			l, err := d.Readlink(bg, p)
			if err != nil {
				return err
			}
			v += " -> " + l
		}
		out[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// world is a root holding a destination "dest" (with existing.txt) and files
// outside it, over a backend.
func world(t *testing.T, b vfs.Backend) *dir.Dir {
	t.Helper()
	d, _ := dir.New(b)
	for p, s := range map[string]string{"outside/secret": "s3cret", "dest/existing.txt": "old", "evil.txt": "original"} {
		if err := d.MkdirAll(bg, filepath.Dir(p)); err != nil {
			t.Fatal(err)
		}
		if err := d.WriteFile(bg, p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func without(m map[string]string, prefix string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if k != prefix && !hasPrefix(k, prefix+"/") {
			out[k] = v
		}
	}
	return out
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

func TestCorpus(t *testing.T) {
	backends := map[string]func(t *testing.T) vfs.Backend{
		"memory": func(t *testing.T) vfs.Backend { return memory.New() },
		"physical": func(t *testing.T) vfs.Backend {
			p, err := physical.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
	}
	for _, bname := range []string{"memory", "physical"} {
		for _, c := range archivetest.Corpus() {
			t.Run(bname+"/"+c.Name, func(t *testing.T) {
				if bname == "physical" && c.Err != nil && os.Getenv("CAPFS_STRESS") == "" {
					// Refused before anything is written: the memory run covers
					// the decision; CAPFS_STRESS=1 runs it on disk too.
					t.Skip("refused archive: covered on memory")
				}
				root := world(t, backends[bname](t))
				before := snapshot(t, root)
				res, err := archive.ExtractToDir(bg, root, bytes.NewReader(c.Data), int64(len(c.Data)), "dest", c.Opts)
				after := snapshot(t, root)
				if !maps.Equal(without(before, "dest"), without(after, "dest")) {
					t.Fatalf("something outside dest changed:\nbefore %v\nafter  %v", before, after)
				}
				if c.Err != nil {
					if !errors.Is(err, c.Err) {
						t.Fatalf("err = %v, want %v", err, c.Err)
					}
					var ve *vfs.Error
					if !errors.As(err, &ve) {
						t.Fatalf("err %T is not a *vfs.Error", err)
					}
					if !maps.Equal(before, after) {
						t.Fatalf("a refused archive changed the destination:\nbefore %v\nafter  %v", before, after)
					}
					return
				}
				if err != nil {
					t.Fatalf("Extract: %v (filtered %+v)", err, res.Filtered)
				}
				var got []string
				for _, it := range res.Extracted {
					got = append(got, it.Path)
				}
				if !slices.Equal(got, c.Extracted) && !(len(got) == 0 && len(c.Extracted) == 0) {
					t.Errorf("extracted %q, want %q", got, c.Extracted)
				}
				gotF := map[string]archive.Reason{}
				for _, f := range res.Filtered {
					gotF[f.Name] = f.Reason
				}
				if !maps.Equal(gotF, c.Filtered) {
					t.Errorf("filtered %v, want %v (%+v)", gotF, c.Filtered, res.Filtered)
				}
				dest, err := root.Sub(bg, "dest")
				if err != nil {
					t.Fatal(err)
				}
				// Everything listed as extracted is there.
				for _, it := range res.Extracted {
					fi, err := dest.Lstat(bg, it.Path)
					if err != nil {
						t.Errorf("extracted %s: %v", it.Path, err)
						continue
					}
					if want, ok := c.Modes[it.Path]; ok && fi.Mode() != want {
						t.Errorf("%s: mode %v, want %v", it.Path, fi.Mode(), want)
					}
					if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
						t.Errorf("%s: mode %v keeps a special bit", it.Path, fi.Mode())
					}
					if want, ok := c.Links[it.Path]; ok {
						if l, err := dest.Readlink(bg, it.Path); err != nil || l != want {
							t.Errorf("%s: link %q, %v; want %q", it.Path, l, err, want)
						}
					}
				}
				// And nothing filtered is, unless it was there before.
				for _, f := range res.Filtered {
					if f.Path == "" || before["dest/"+f.Path] != "" {
						continue
					}
					if _, ok := after["dest/"+f.Path]; ok && f.Reason != archive.ReasonCollision && f.Reason != archive.ReasonThroughLink {
						t.Errorf("filtered %s (%s) exists", f.Path, f.Reason)
					}
				}
			})
		}
	}
}

// TestNothingEscapesOnDisk extracts the whole corpus onto a physical root in a
// host directory and checks the host directory around it byte for byte.
func TestNothingEscapesOnDisk(t *testing.T) {
	host := t.TempDir()
	rootDir := filepath.Join(host, "root")
	os.MkdirAll(filepath.Join(rootDir, "dest"), 0o755)
	os.WriteFile(filepath.Join(host, "evil.txt"), []byte("original"), 0o644)
	os.MkdirAll(filepath.Join(host, "etc"), 0o755)
	os.WriteFile(filepath.Join(host, "etc", "passwd"), []byte("root:x:0:0"), 0o644)
	listHost := func() map[string]string {
		m := map[string]string{}
		filepath.WalkDir(host, func(p string, de fs.DirEntry, err error) error {
			if p == rootDir {
				return filepath.SkipDir
			}
			fi, _ := de.Info()
			b, _ := os.ReadFile(p)
			m[p] = fi.Mode().String() + string(b)
			return nil
		})
		return m
	}
	before := listHost()
	b, err := physical.New(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := dir.New(b)
	for _, c := range archivetest.Corpus() {
		if c.Err != nil && c.Err != archive.ErrRefused {
			continue // refused before any name is acted on
		}
		opts := c.Opts
		opts.Links = archive.LinksInside
		opts.Overwrite = true
		archive.ExtractToDir(bg, d, bytes.NewReader(c.Data), int64(len(c.Data)), "dest", opts)
	}
	if after := listHost(); !maps.Equal(before, after) {
		t.Fatalf("host changed outside the root:\n%v\n%v", before, after)
	}
}
