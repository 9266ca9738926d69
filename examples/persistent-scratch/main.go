// Command persistent-scratch shows an agent's scratch space that outlives the
// agent: a sqlite scratch file handed to the agent as a dir.Dir. The agent writes
// notes, the host takes a snapshot, the agent's process is killed (kill -9) in
// the middle of its work, a new session reopens the file and finds every write
// the agent was told had succeeded, then the agent makes a mess and the host
// rolls the scratch back to the snapshot.
//
// Run it with `go run ./examples/persistent-scratch`.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/capfs/capfs/backends/sqlite"
	"github.com/capfs/capfs/dir"
)

// childEnv marks the agent process the demo starts and kills.
const childEnv = "CAPFS_EXAMPLE_AGENT_SCRATCH"

func main() {
	if file := os.Getenv(childEnv); file != "" {
		agent(file)
		return
	}
	if err := run(context.Background(), os.Stdout, os.Args[0]); err != nil {
		fmt.Fprintln(os.Stderr, "persistent-scratch:", err)
		os.Exit(1)
	}
}

// session opens the scratch file and hands out a Dir on it, as an agent host
// would at the start of every session.
func session(file string) (*sqlite.FS, *dir.Dir, error) {
	f, err := sqlite.Open(file, sqlite.WithQuota(64<<20))
	if err != nil {
		return nil, nil, err
	}
	d, _ := dir.New(f)
	return f, d, nil
}

// run is the host. self is an executable that becomes the agent when started
// with childEnv set (this program, or the test binary).
func run(ctx context.Context, out io.Writer, self string) error {
	work, err := os.MkdirTemp("", "capfs-scratch-example-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	file := filepath.Join(work, "agent.db")
	snap := filepath.Join(work, "before-refactor.db")

	// Session 1: the agent writes its notes; the host snapshots them.
	f, d, err := session(file)
	if err != nil {
		return err
	}
	if err := d.MkdirAll(ctx, "notes"); err != nil {
		return err
	}
	if err := d.WriteFile(ctx, "notes/plan.md", []byte("1. read the code\n2. refactor\n"), 0o644); err != nil {
		return err
	}
	if err := f.Snapshot(ctx, snap); err != nil {
		return err
	}
	fmt.Fprintln(out, "session 1: wrote notes/plan.md; snapshot taken")
	if err := f.Close(); err != nil {
		return err
	}

	// Session 2: the agent runs in its own process and is killed mid-work.
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), childEnv+"="+file)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	acked := 0
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "wrote ") {
			acked++
		}
		if acked == 5 {
			cmd.Process.Kill() // kill -9, in the middle of the agent's loop
			break
		}
	}
	cmd.Wait()
	fmt.Fprintf(out, "session 2: agent killed with SIGKILL after %d acknowledged writes\n", acked)

	// Session 3: everything acknowledged is there, whole.
	f, d, err = session(file)
	if err != nil {
		return err
	}
	ents, err := d.ReadDir(ctx, "notes")
	if err != nil {
		return err
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	fmt.Fprintf(out, "session 3: notes/ holds %s\n", strings.Join(names, " "))
	for i := range acked {
		b, err := d.ReadFile(ctx, fmt.Sprintf("notes/step%d.md", i))
		if err != nil || string(b) != fmt.Sprintf("step %d done\n", i) {
			return fmt.Errorf("acknowledged write %d lost: %q, %v", i, b, err)
		}
	}
	fmt.Fprintf(out, "session 3: all %d acknowledged writes survived the crash\n", acked)
	// The agent makes a mess.
	if err := d.RemoveAll(ctx, "notes"); err != nil {
		return err
	}
	if err := d.WriteFile(ctx, "oops.txt", []byte("deleted everything\n"), 0o644); err != nil {
		return err
	}
	fmt.Fprintln(out, "session 3: the agent removed notes/ and wrote oops.txt")
	if err := f.Close(); err != nil {
		return err
	}

	// The host rolls the scratch back to the snapshot.
	if err := sqlite.Restore(snap, file); err != nil {
		return err
	}
	f, d, err = session(file)
	if err != nil {
		return err
	}
	defer f.Close()
	plan, err := d.ReadFile(ctx, "notes/plan.md")
	if err != nil {
		return err
	}
	_, oops := d.Stat(ctx, "oops.txt")
	fmt.Fprintf(out, "rolled back: notes/plan.md = %q, oops.txt gone: %v\n", plan, errors.Is(oops, os.ErrNotExist))
	return nil
}

// agent writes one note after another, printing "wrote N" after each write
// returns, until it is killed.
func agent(file string) {
	_, d, err := session(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
	ctx := context.Background()
	for i := 0; i < 100000; i++ {
		if err := d.WriteFile(ctx, fmt.Sprintf("notes/step%d.md", i), []byte(fmt.Sprintf("step %d done\n", i)), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "agent:", err)
			os.Exit(1)
		}
		fmt.Printf("wrote %d\n", i)
	}
}
