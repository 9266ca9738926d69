package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListingsNameUnaddressable: capfs ls (plain, -l and --json) and tree
// name each host name no capfs path can hold ("a\b", "sub/c\d") once on
// stderr with the reason, and still list the rest; with the openat2 and the
// portable resolvers. Fails on 8a35f16 (the names vanished silently).
func TestListingsNameUnaddressable(t *testing.T) {
	host := t.TempDir()
	for _, name := range []string{"a.txt", `a\b`, "sub/x", `sub/c\d`} {
		p := filepath.Join(host, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const (
		root = `p: skipped 1 name the capability cannot address (a\\b: contains a backslash)`
		sub  = `p/sub: skipped 1 name the capability cannot address (c\\d: contains a backslash)`
	)
	for _, r := range []string{"auto", "portable"} {
		t.Run(r, func(t *testing.T) {
			t.Setenv("CAPFS_PHYSICAL_RESOLVER", r)
			for _, c := range []struct {
				args []string
				want []string
			}{
				{[]string{"ls", "/p"}, []string{"capfs ls: " + root}},
				{[]string{"ls", "-l", "/p"}, []string{"capfs ls: " + root}},
				{[]string{"ls", "--json", "/p"}, []string{"capfs ls: " + root}},
				{[]string{"ls", "/p/sub"}, []string{"capfs ls: " + sub}},
				{[]string{"tree", "/"}, []string{"capfs tree: " + root, "capfs tree: " + sub}},
			} {
				var out, errb bytes.Buffer
				args := append([]string{"--no-default-mounts", "-m", "p=physical:" + host, "--audit", "off"}, c.args...)
				if code := execute(context.Background(), args, strings.NewReader(""), &out, &errb); code != 0 {
					t.Fatalf("capfs %q exited %d: %s", c.args, code, errb.String())
				}
				for _, w := range c.want {
					if n := strings.Count(errb.String(), w); n != 1 {
						t.Errorf("capfs %q: stderr has %q %d times; want once:\n%s", c.args, w, n, errb.String())
					}
				}
				if !strings.Contains(out.String(), "x") && !strings.Contains(out.String(), "a.txt") {
					t.Errorf("capfs %q lost the other entries:\n%s", c.args, out.String())
				}
			}
		})
	}
}
