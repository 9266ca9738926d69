package billyfs

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/test"
	"gopkg.in/check.v1"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
)

// Why a case of go-billy's FilesystemSuite fails on billyfs by design.
const (
	whyBoundary = "the suite wants the bare billy.ErrCrossedBoundary (==); billyfs returns an *fs.PathError " +
		"(op, guest path, EPERM) that errors.Is it (TestCrossedBoundary)"
	whyAbsolute = "capfs never follows an absolute symlink target (it is data: issue 29), where the suite " +
		"follows it from the root; the physical backend refuses to create one"
	whyHostLink = "the physical backend refuses to create a symlink whose target leaves the tree " +
		"(a host process could follow it); the memory backend stores it as data"
	whyClimbing = "the suite makes a symlink whose target climbs out of the root, then wants Stat through it to " +
		"answer the bare billy.ErrCrossedBoundary: the physical backend refuses to create it; on memory, Stat answers the *fs.PathError"
)

// deviations lists, in one place, the suite's cases billyfs fails on purpose,
// with the reason. A key is a test method ("TestX": on every backend) or
// "backend/TestX" (on that one). [TestBillySuite] skips them;
// [TestBillySuiteDeviationsStillFail] runs each one and fails when it passes,
// so the list cannot rot.
var deviations = map[string]string{
	"TestCreateOutOffBoundaryVariants":      whyBoundary,
	"TestOpenOutOffBoundary":                whyBoundary,
	"TestStatOutOffBoundary":                whyBoundary,
	"TestRenameOutOffBoundary":              whyBoundary,
	"TestRemoveOutOffBoundary":              whyBoundary,
	"TestOpenWithSymlinkToAbsolutePath":     whyAbsolute,
	"physical/TestReadlinkWithAbsolutePath": whyHostLink,
	"TestSymlinkWithChrootCrossBounders":    whyClimbing,
}

// loadTests pass but make and remove 102,400 temp files each (~10 s apiece
// on a host directory, one openat2 per call). They run on the memory backend
// only, to keep the suite within `make test`'s budget.
var loadTests = []string{"TestTempFileMany", "TestTempFileManyWithUtil"}

// backends are the file systems the suite runs on: billyfs over a memory Dir,
// over a physical Dir on a fresh host directory, and the Chroot of a
// directory of a memory Dir.
var backends = []string{"memory", "physical", "chroot"}

// deviation returns why method fails on backend by design, or "".
func deviation(backend, method string) string {
	if why := deviations[backend+"/"+method]; why != "" {
		return why
	}
	return deviations[method]
}

// suite is go-billy's FilesystemSuite over a fresh billyfs for each test.
type suite struct {
	test.FilesystemSuite
	backend string
	strict  bool // run the listed deviations too
	closeFn func() error
}

func (s *suite) SetUpTest(c *check.C) {
	method := c.TestName()[strings.LastIndexByte(c.TestName(), '.')+1:]
	if why := deviation(s.backend, method); why != "" && !s.strict {
		c.Skip(why)
	}
	if s.backend != "memory" && slices.Contains(loadTests, method) {
		c.Skip("load test: runs on memory")
	}
	fsys, err := s.newFS(c)
	c.Assert(err, check.IsNil)
	s.FilesystemSuite = test.NewFilesystemSuite(fsys)
}

func (s *suite) newFS(c *check.C) (billy.Filesystem, error) {
	s.closeFn = nil
	switch s.backend {
	case "memory":
		d, _ := dir.New(memory.New())
		return New(d), nil
	case "chroot":
		d, _ := dir.New(memory.New())
		return New(d).Chroot("base")
	}
	b, err := physical.New(c.MkDir())
	if err != nil {
		return nil, err
	}
	s.closeFn = b.Close
	d, _ := dir.New(b)
	return New(d), nil
}

func (s *suite) TearDownTest(c *check.C) {
	if s.closeFn != nil {
		c.Check(s.closeFn(), check.IsNil)
	}
}

// TestBillySuite runs go-billy's own FilesystemSuite against billyfs on each
// backend; only the cases in [deviations] (and [loadTests] off memory) are
// skipped, with their reason.
func TestBillySuite(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			var out bytes.Buffer
			r := check.Run(&suite{backend: backend}, &check.RunConf{Output: &out})
			t.Logf("passed %d, skipped %d, failed %d", r.Succeeded, r.Skipped, r.Failed+r.Panicked+r.FixturePanicked+r.Missed)
			byWhy := map[string][]string{}
			for _, m := range listed(backend) {
				byWhy[deviation(backend, m)] = append(byWhy[deviation(backend, m)], m)
			}
			for why, ms := range byWhy {
				t.Logf("skipped %s: %s", strings.Join(ms, ", "), why)
			}
			if !r.Passed() || r.Succeeded == 0 {
				t.Errorf("%s\n%s", r, out.String())
			}
		})
	}
}

// TestBillySuiteDeviationsStillFail runs each listed case alone, unskipped,
// and fails if it passes: it must then leave the list.
func TestBillySuiteDeviationsStillFail(t *testing.T) {
	for _, backend := range backends {
		for _, method := range listed(backend) {
			var out bytes.Buffer
			r := check.Run(&suite{backend: backend, strict: true}, &check.RunConf{Output: &out, Filter: "^" + method + "$"})
			switch {
			case r.Succeeded+r.Failed != 1:
				t.Errorf("%s/%s: ran %s; want exactly one test\n%s", backend, method, r, out.String())
			case r.Succeeded == 1:
				t.Errorf("%s/%s passes now: remove it from deviations (%q)", backend, method, deviation(backend, method))
			}
		}
	}
}

// listed returns the methods [deviations] lists for backend, sorted.
func listed(backend string) []string {
	var out []string
	for key := range deviations {
		b, method, ok := strings.Cut(key, "/")
		switch {
		case !ok:
			out = append(out, key)
		case b == backend:
			out = append(out, method)
		case !slices.Contains(backends, b):
			panic(fmt.Sprintf("deviations: unknown backend in %q", key))
		}
	}
	slices.Sort(out)
	return out
}
