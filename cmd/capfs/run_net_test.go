//go:build linux

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/capfs/capfs/authority"
)

// tinyRegistry is an npm-compatible registry of one package, tiny@1.0.0: the
// package document and its tarball. It counts the requests it serves.
type tinyRegistry struct {
	srv  *httptest.Server
	tgz  []byte
	mu   sync.Mutex
	hits []string
}

func newTinyRegistry(t *testing.T) *tinyRegistry {
	t.Helper()
	reg := &tinyRegistry{tgz: tinyTarball(t)}
	reg.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reg.mu.Lock()
		reg.hits = append(reg.hits, r.URL.Path)
		reg.mu.Unlock()
		switch r.URL.Path {
		case "/tiny":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"name":"tiny","dist-tags":{"latest":"1.0.0"},"versions":{"1.0.0":{"name":"tiny","version":"1.0.0","dist":{"tarball":%q,"integrity":%q}}}}`,
				reg.tarballURL(), reg.integrity())
		case "/tiny/-/tiny-1.0.0.tgz":
			w.Write(reg.tgz)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(reg.srv.Close)
	return reg
}

func (reg *tinyRegistry) host() string       { return strings.TrimPrefix(reg.srv.URL, "http://") }
func (reg *tinyRegistry) tarballURL() string { return reg.srv.URL + "/tiny/-/tiny-1.0.0.tgz" }
func (reg *tinyRegistry) integrity() string {
	sum := sha512.Sum512(reg.tgz)
	return "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
}

func (reg *tinyRegistry) served() int {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	return len(reg.hits)
}

// tinyTarball is the package's .tgz: package/package.json and package/index.js.
func tinyTarball(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct{ name, body string }{
		{"package/package.json", `{"name":"tiny","version":"1.0.0","main":"index.js"}`},
		{"package/index.js", "module.exports = 'tiny';\n"},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body))}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, f.body)
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// npmProject writes a project depending on tiny, locked to reg.
func npmProject(t *testing.T, reg *tinyRegistry) string {
	t.Helper()
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"package.json": `{"name":"app","version":"1.0.0","dependencies":{"tiny":"1.0.0"}}`,
		"package-lock.json": fmt.Sprintf(`{"name":"app","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{`+
			`"":{"name":"app","version":"1.0.0","dependencies":{"tiny":"1.0.0"}},`+
			`"node_modules/tiny":{"version":"1.0.0","resolved":%q,"integrity":%q}}}`, reg.tarballURL(), reg.integrity()),
		".npmrc": "registry=" + reg.srv.URL + "/\n",
	})
	return root
}

func TestRunNetAllowNpmCi(t *testing.T) {
	needSandbox(t)
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed, skipping the --net npm test")
	}
	t.Parallel()
	reg := newTinyRegistry(t)
	cache := t.TempDir()
	env := []string{"CAPFS_CACHE_DIR=" + cache}

	// Without --net: npm fails (offline, nothing cached), nothing reaches the
	// registry, and capfs names the flag.
	root := npmProject(t, reg)
	r := runCapfsEnv(t, root, env, "run", "--", "npm", "ci", "--no-audit", "--no-fund")
	if r.code == 0 {
		t.Fatalf("npm ci without --net succeeded:\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, "--net allow=HOST[:PORT]") {
		t.Fatalf("no hint naming --net:\n%s", r.stderr)
	}
	if n := reg.served(); n != 0 {
		t.Fatalf("the registry served %d requests to a sandbox without network", n)
	}

	// With the registry allowed: npm ci installs, and the result syncs back.
	r = runCapfsEnv(t, root, env, "run", "--net", "allow="+reg.host(), "--", "npm", "ci", "--no-audit", "--no-fund").want(t, 0)
	b, err := os.ReadFile(filepath.Join(root, "node_modules", "tiny", "index.js"))
	if err != nil || string(b) != "module.exports = 'tiny';\n" {
		t.Fatalf("node_modules/tiny/index.js = %q, %v\n%s", b, err, r.stderr)
	}
	if reg.served() == 0 {
		t.Fatal("the registry saw no request")
	}

	// The cache npm filled under --net serves an offline run (the default).
	os.RemoveAll(filepath.Join(root, "node_modules"))
	before := reg.served()
	r = runCapfsEnv(t, root, env, "run", "--", "npm", "ci", "--no-audit", "--no-fund").want(t, 0)
	if _, err := os.Stat(filepath.Join(root, "node_modules", "tiny", "index.js")); err != nil {
		t.Fatalf("offline npm ci from the seeded cache: %v\n%s", err, r.stderr)
	}
	if reg.served() != before {
		t.Fatal("an offline run reached the registry")
	}
}

func TestRunNetAllowRefusesOthers(t *testing.T) {
	needSandbox(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed, skipping the --net test")
	}
	t.Parallel()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "reached") }))
	defer ok.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a host not allowed was reached: %s", r.URL)
	}))
	defer other.Close()
	root := t.TempDir()
	auditLog := filepath.Join(t.TempDir(), "audit.jsonl")
	host := strings.TrimPrefix(ok.URL, "http://")
	otherHost := strings.TrimPrefix(other.URL, "http://")
	script := `curl -sS -f ` + ok.URL + `/a; echo; curl -sS -f ` + other.URL + `/b; echo "other=$?"; ` +
		// A name the proxy refuses is never looked up, inside or out.
		`curl -sS -f http://registry.invalid/ 2>&1 | tail -c 0; getent hosts example.com || echo "no dns"`
	r := runCapfs(t, root, "--audit", auditLog, "run", "--net", "allow="+host, "--", "sh", "-c", script).want(t, 0)
	if !strings.Contains(r.stdout, "reached\n") || !strings.Contains(r.stdout, "other=22") || !strings.Contains(r.stdout, "no dns") {
		t.Fatalf("sandbox output:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "refused the sandbox's connection to "+otherHost) ||
		!strings.Contains(r.stderr, "refused the sandbox's connection to registry.invalid:80") {
		t.Fatalf("refusals not said:\n%s", r.stderr)
	}
	log, err := os.ReadFile(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"op":"net.get","path":"` + host + `"`, `"path":"` + otherHost + `","outcome":"denied"`} {
		if !strings.Contains(string(log), want) {
			t.Fatalf("audit log lacks %s:\n%s", want, log)
		}
	}
}

func TestRunNetFlag(t *testing.T) {
	for _, bad := range []string{"allow=", "allow=*.example.com", "everything", "allow=host:99999"} {
		r := runCapfs(t, t.TempDir(), "run", "--net", bad, "--", "true")
		if r.code != exitUsage || !strings.Contains(r.stderr, "--net") {
			t.Errorf("--net %s: exit %d, want %d with a message naming --net:\n%s", bad, r.code, exitUsage, r.stderr)
		}
	}
}

func TestRunGrantsNet(t *testing.T) {
	needSandbox(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed, skipping the --net test")
	}
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "reached") }))
	defer srv.Close()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"docs/guide.md": "GUIDE"})
	file := grantSetFile(t, root, authority.Subject{Kind: "agent", ID: "a1"},
		map[string][]authority.Access{"docs": {authority.List, authority.Metadata, authority.Read}})
	script := `cat /grants/project/docs/guide.md; echo; curl -sS -f ` + srv.URL + `/x; echo " exit=$?"`
	r := runCapfs(t, root, "-m", "project=physical:"+root, "run", "--grants", file, "--net", "allow="+strings.TrimPrefix(srv.URL, "http://"), "--", "sh", "-c", script).want(t, 0)
	if r.stdout != "GUIDE\nreached exit=0\n" {
		t.Fatalf("stdout %q\nstderr:\n%s", r.stdout, r.stderr)
	}
	r = runCapfs(t, root, "-m", "project=physical:"+root, "run", "--grants", file, "--", "sh", "-c", script).want(t, 0)
	if !strings.HasPrefix(r.stdout, "GUIDE\n") || strings.Contains(r.stdout, "reached") {
		t.Fatalf("without --net the grants run reached the host: %q", r.stdout)
	}
}
