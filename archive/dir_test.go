package archive_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/capfs/capfs/archive"
	"github.com/capfs/capfs/archive/archivetest"
	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

type ent = archivetest.Ent

func extract(t *testing.T, d *dir.Dir, data []byte, opts archive.Options) (*archive.Result, error) {
	t.Helper()
	return archive.ExtractToDir(bg, d, bytes.NewReader(data), int64(len(data)), ".", opts)
}

// The Dir's policy decides every entry: the secret and persistence defaults
// filter .git/hooks and .ssh entries, the rest is extracted, and each call is
// audited with the archive purpose visible to the policy.
func TestPolicyFiltersEntries(t *testing.T) {
	trail := audit.NewRing(10000)
	var mu sync.Mutex
	var purposes []string
	pol := policy.Func(func(ctx context.Context, r *policy.Request) policy.Decision {
		mu.Lock()
		purposes = append(purposes, dir.Purpose(ctx))
		mu.Unlock()
		return policy.Defaults().Decide(ctx, r)
	})
	d, _ := dir.New(memory.New(), dir.WithPolicy(pol), dir.WithAudit(trail))
	data := archivetest.Tar(ent{Name: ".git/hooks/post-checkout", Body: "#!/bin/sh\nrm -rf ~"}, ent{Name: "home/.ssh/id_rsa", Body: "KEY"},
		ent{Name: "src/main.go", Body: "package main"}, ent{Name: ".bashrc", Body: "evil"},
		// A secret the destination's policy will not even look at: filtered
		// too, not a failure of the whole archive.
		ent{Name: ".env", Body: "TOKEN=1"})
	res, err := extract(t, d, data, archive.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Extracted) != 1 || res.Extracted[0].Path != "src/main.go" {
		t.Fatalf("extracted %+v", res.Extracted)
	}
	if len(res.Filtered) != 4 {
		t.Fatalf("filtered %+v", res.Filtered)
	}
	for _, f := range res.Filtered {
		if f.Reason != archive.ReasonPolicy || f.Detail == "" {
			t.Errorf("filtered %+v", f)
		}
	}
	for _, p := range purposes {
		if p != dir.PurposeArchive {
			t.Fatalf("a decision without the archive purpose: %q", purposes)
		}
	}
	if ok, _ := d.Exists(bg, ".git"); ok {
		t.Fatal(".git was created")
	}
	if len(trail.Events()) == 0 {
		t.Fatal("no audit events")
	}
}

func TestReadOnlyRefused(t *testing.T) {
	d, _ := dir.New(memory.New())
	before := snapshot(t, d)
	_, err := extract(t, d.ReadOnly(), archivetest.Tar(ent{Name: "a", Body: "x"}), archive.Options{})
	if vfs.CodeOf(err) != vfs.CodeReadOnly {
		t.Fatalf("err = %v, want read_only", err)
	}
	if !maps.Equal(before, snapshot(t, d)) {
		t.Fatal("changed")
	}
}

// A merge that fails part way (the backend's quota) removes what it made.
func TestMergeRollsBack(t *testing.T) {
	m := memory.New(memory.WithQuota(64 << 10))
	d, _ := dir.New(m)
	d.WriteFile(bg, "keep", []byte("k"), 0o644)
	before := snapshot(t, d)
	big := make([]ent, 0, 10)
	for i := range 10 {
		big = append(big, ent{Name: "d/f" + string(rune('0'+i)), Size: 10 << 10})
	}
	res, err := extract(t, d, archivetest.Tar(big...), archive.Options{})
	if vfs.CodeOf(err) != vfs.CodeQuota {
		t.Fatalf("err = %v, want quota_exceeded", err)
	}
	if !res.Merged || !res.RolledBack {
		t.Fatalf("merged %v rolled back %v", res.Merged, res.RolledBack)
	}
	if after := snapshot(t, d); !maps.Equal(before, after) {
		t.Fatalf("rollback left %v", after)
	}
}

func TestTimeout(t *testing.T) {
	d, _ := dir.New(memory.New())
	data := archivetest.Gz(archivetest.Tar(ent{Name: "a", Size: 8 << 20}))
	_, err := extract(t, d, data, archive.Options{Limits: archive.Limits{Timeout: time.Nanosecond}})
	if vfs.CodeOf(err) != vfs.CodeCanceled {
		t.Fatalf("err = %v, want canceled", err)
	}
}

func TestKeepModTimesAndSpill(t *testing.T) {
	d, _ := dir.New(memory.New())
	data := archivetest.Tar(ent{Name: "a", Body: "hello"}, ent{Name: "b", Size: 100 << 10})
	res, err := extract(t, d, data, archive.Options{KeepModTimes: true, MemoryBudget: -1, StagingDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != 5+100<<10 {
		t.Fatalf("bytes %d", res.Bytes)
	}
	fi, _ := d.Stat(bg, "a")
	if !fi.ModTime().Equal(time.Unix(1700000000, 0)) {
		t.Fatalf("mtime %v", fi.ModTime())
	}
	if b, _ := d.ReadFile(bg, "a"); string(b) != "hello" {
		t.Fatalf("a = %q", b)
	}
}

// CreateFromDir then ExtractToDir gives the tree back; two creations with a
// fixed time are byte-identical; hidden entries are skipped and listed.
func TestCreateRoundTrip(t *testing.T) {
	for _, f := range []archive.Format{archive.FormatTarZst, archive.FormatZip, archive.FormatTarGz, archive.FormatTar} {
		t.Run(f.String(), func(t *testing.T) {
			m := memory.New()
			host, _ := dir.New(m)
			src := host
			src.MkdirAll(bg, "p/sub")
			src.WriteFile(bg, "p/a.txt", []byte("alpha"), 0o644)
			src.WriteFile(bg, "p/sub/run.sh", []byte("#!/bin/sh"), 0o755)
			src.WriteFile(bg, "p/.env", []byte("SECRET"), 0o644)
			src.Symlink(bg, "a.txt", "p/link")
			src, _ = dir.New(m, dir.WithPolicy(policy.Defaults()))
			var out [2]bytes.Buffer
			for i := range out {
				res, err := archive.CreateFromDir(bg, src, "p", &out[i], archive.CreateOptions{Format: f, ModTime: time.Unix(1e9, 0)})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Skipped) != 1 || res.Skipped[0].Path != ".env" {
					t.Fatalf("skipped %+v", res.Skipped)
				}
			}
			if !bytes.Equal(out[0].Bytes(), out[1].Bytes()) {
				t.Fatal("not reproducible")
			}
			dst, _ := dir.New(memory.New())
			res, err := extract(t, dst, out[0].Bytes(), archive.Options{Links: archive.LinksInside, KeepModTimes: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Filtered) != 0 {
				t.Fatalf("filtered %+v", res.Filtered)
			}
			got := snapshot(t, dst)
			want := map[string]string{
				"a.txt": "-rw-r--r-- ", "sub": "drwxr-xr-x", "sub/run.sh": "-rwxr-xr-x ", "link": "Lrwxrwxrwx -> a.txt",
			}
			for k, v := range want {
				if len(got[k]) < len(v) || got[k][:len(v)] != v {
					t.Errorf("%s = %q, want %q...", k, got[k], v)
				}
			}
			if b, _ := dst.ReadFile(bg, "sub/run.sh"); string(b) != "#!/bin/sh" {
				t.Errorf("run.sh = %q", b)
			}
		})
	}
}

func TestStrictReportsAll(t *testing.T) {
	d, _ := dir.New(memory.New())
	res, err := extract(t, d, archivetest.Tar(ent{Name: "../a", Body: "1"}, ent{Name: "b", Type: tar.TypeFifo}, ent{Name: "c", Body: "ok"}), archive.Options{Strict: true})
	if !errors.Is(err, archive.ErrRefused) || len(res.Filtered) != 2 {
		t.Fatalf("err %v filtered %+v", err, res.Filtered)
	}
	if ok, _ := d.Exists(bg, "c"); ok {
		t.Fatal("strict extraction wrote c")
	}
}

// A filtered entry leaves no parent directory behind.
func TestFilteredEntryMakesNoParent(t *testing.T) {
	d, _ := dir.New(memory.New(), dir.WithPolicy(policy.Defaults()))
	res, err := extract(t, d, archivetest.Tar(ent{Name: "cfg/.env", Body: "S=1"}, ent{Name: "keep/a", Body: "a"}), archive.Options{})
	if err != nil || len(res.Filtered) != 1 {
		t.Fatalf("%v %+v", err, res)
	}
	if ok, _ := d.Exists(bg, "cfg"); ok {
		t.Fatal("cfg was created for a filtered entry")
	}
	if ok, _ := d.Exists(bg, "keep/a"); !ok {
		t.Fatal("keep/a missing")
	}
}
