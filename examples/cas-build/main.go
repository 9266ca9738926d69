//go:build linux

// Command cas-build shows a build on content-addressed trees, the way remote
// build systems hand a worker its inputs: snapshot a source tree into a CAS
// store (its root digest names it), materialize the digest into a checkout by
// hard links from the store's link cache, run the build in a sandbox that sees
// the inputs read-only and writes only its output directory, then ingest the
// outputs and print both digests. Run twice: the second run finds every input
// blob stored and every cache entry extracted, so it writes no new blob and
// links every file.
//
//	go run ./examples/cas-build [-store DIR] [-src DIR] [-runs 2]
//
// Without -src it builds a small generated project. The build runs under
// bubblewrap (materialize/sandbox) when the host has a working one, and
// unsandboxed otherwise (it says so).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/capfs/capfs/backends/cas"
	"github.com/capfs/capfs/materialize/sandbox"
)

func main() {
	store := flag.String("store", "", "CAS store directory (default: a temporary one)")
	src := flag.String("src", "", "source tree to build (default: a generated project)")
	runs := flag.Int("runs", 2, "how many times to run the build")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *store, *src, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "cas-build:", err)
		os.Exit(1)
	}
}

// buildScript is the build: every .txt input upper-cased, and a line count. It
// reads $SRC and writes only $OUT.
const buildScript = `set -e
cd "$SRC"
for f in *.txt; do tr a-z A-Z < "$f" > "$OUT/$f.upper"; done
cat *.txt | wc -l | tr -d ' ' > "$OUT/lines"`

// RunResult is what one build run did.
type RunResult struct {
	Input, Output cas.Digest
	Materialized  cas.MaterializeStats
	NewBlobs      int  // blobs the run added to the store
	Sandboxed     bool // the build ran under bubblewrap
}

func run(ctx context.Context, w io.Writer, storeDir, src string, runs int) error {
	tmp, err := os.MkdirTemp("", "cas-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if storeDir == "" {
		storeDir = filepath.Join(tmp, "store")
	}
	if src == "" {
		src = filepath.Join(tmp, "project")
		if err := writeProject(src); err != nil {
			return err
		}
	}
	st, err := cas.OpenStore(storeDir)
	if err != nil {
		return err
	}
	defer st.Close()
	for i := 1; i <= runs; i++ {
		r, err := buildOnce(ctx, st, src, filepath.Join(tmp, fmt.Sprintf("run%d", i)))
		if err != nil {
			return err
		}
		how := "sandboxed (bubblewrap)"
		if !r.Sandboxed {
			how = "unsandboxed: no working bubblewrap here"
		}
		fmt.Fprintf(w, "run %d: input %s\n", i, r.Input)
		fmt.Fprintf(w, "run %d: output %s\n", i, r.Output)
		fmt.Fprintf(w, "run %d: %d files linked, %d extracted into the link cache, %d new blobs; build %s\n",
			i, r.Materialized.Linked, r.Materialized.Extracted, r.NewBlobs, how)
	}
	return nil
}

// buildOnce is one build in directory work.
func buildOnce(ctx context.Context, st *cas.Store, src, work string) (RunResult, error) {
	var r RunResult
	before, _, err := st.Usage()
	if err != nil {
		return r, err
	}
	// 1. The inputs, by digest.
	if r.Input, err = st.SnapshotHost(ctx, src, cas.SnapshotOptions{}); err != nil {
		return r, err
	}
	// 2. A checkout of the digest: hard links to read-only cache entries.
	if err := os.MkdirAll(work, 0o700); err != nil {
		return r, err
	}
	in, out := filepath.Join(work, "in"), filepath.Join(work, "out")
	if r.Materialized, err = st.Materialize(ctx, r.Input, in, cas.MaterializeOptions{}); err != nil {
		return r, err
	}
	if err := os.Mkdir(out, 0o755); err != nil {
		return r, err
	}
	// 3. The build: inputs read-only at /src, outputs at /out.
	runner := sandbox.Default()
	res, err := runner.Run(ctx, &sandbox.Launch{
		Path: "/bin/sh", Args: []string{"-c", buildScript},
		Env:    append(sandbox.MinimalEnv(), "SRC=/src", "OUT=/out"),
		Mounts: []sandbox.Mount{{Source: in, Target: "/src"}, {Source: out, Target: "/out", Writable: true}},
		Stdout: os.Stderr, Stderr: os.Stderr,
	})
	switch {
	case errors.Is(err, sandbox.ErrUnavailable):
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", buildScript)
		cmd.Env = append(os.Environ(), "SRC="+in, "OUT="+out)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return r, fmt.Errorf("build: %w", err)
		}
	case err != nil:
		return r, err
	case res.ExitCode != 0:
		return r, fmt.Errorf("build exited %d", res.ExitCode)
	default:
		r.Sandboxed = res.Sandboxed
	}
	// 4. The outputs, by digest.
	if r.Output, err = st.Ingest(ctx, out); err != nil {
		return r, err
	}
	after, _, err := st.Usage()
	if err != nil {
		return r, err
	}
	r.NewBlobs = after - before
	return r, nil
}

func writeProject(dir string) error {
	files := map[string]string{
		"a.txt":        "alpha\nbeta\n",
		"b.txt":        "gamma\n",
		"c.txt":        "delta\nepsilon\nzeta\n",
		"tools/gen.sh": "#!/bin/sh\necho generated\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		perm := os.FileMode(0o644)
		if filepath.Ext(name) == ".sh" {
			perm = 0o755
		}
		if err := os.WriteFile(p, []byte(body), perm); err != nil {
			return err
		}
	}
	return nil
}
