// Command archivebench measures safe archive extraction (archive.ExtractToDir
// over the physical backend, default limits, links allowed inside) against
// tar -x of the same file, on a large real archive: Go's own source tree
// ($(go env GOROOT)/src) as tar.zst, made once with tar --zstd. Rounds are
// interleaved (capfs, then tar, into fresh directories on the same
// filesystem); the median of each is printed with the ratio capfs / tar (the
// issue's target: at most 1.5).
//
//	go run ./bench/cmd/archivebench [-count 5] [-memory-budget 0]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/capfs/capfs/archive"
	"github.com/capfs/capfs/backends/physical"
	"github.com/capfs/capfs/dir"
)

func main() {
	count := flag.Int("count", 5, "rounds; the median is reported")
	budget := flag.Int64("memory-budget", 0, "archive.Options.MemoryBudget (0: the default)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the capfs extractions to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "archivebench:", err)
			os.Exit(1)
		}
		profile = f
	}
	if err := run(*count, *budget); err != nil {
		fmt.Fprintln(os.Stderr, "archivebench:", err)
		os.Exit(1)
	}
}

var profile *os.File

func run(count int, budget int64) error {
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return err
	}
	src := filepath.Join(strings.TrimSpace(string(goroot)), "src")
	work, err := os.MkdirTemp("", "capfs-archivebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	tarball := filepath.Join(work, "gosrc.tar.zst")
	mk := exec.Command("tar", "--zstd", "-cf", tarball, "-C", src, ".")
	if out, err := mk.CombinedOutput(); err != nil {
		return fmt.Errorf("tar --zstd -c: %v: %s", err, out)
	}
	fi, _ := os.Stat(tarball)
	var ours, theirs []time.Duration
	var res *archive.Result
	for i := range count {
		d1 := filepath.Join(work, fmt.Sprintf("capfs-%d", i))
		d2 := filepath.Join(work, fmt.Sprintf("tar-%d", i))
		os.Mkdir(d1, 0o755)
		os.Mkdir(d2, 0o755)
		// Each extraction starts with the disk's dirty pages written back (the
		// other's writes would otherwise be flushed during it), and the two
		// alternate which goes first.
		runOurs := func() error {
			exec.Command("sync").Run()
			if profile != nil {
				pprof.StartCPUProfile(profile)
			}
			start := time.Now()
			b, err := physical.New(d1)
			if err != nil {
				return err
			}
			d, _ := dir.New(b)
			f, err := os.Open(tarball)
			if err != nil {
				return err
			}
			res, err = archive.ExtractToDir(context.Background(), d, f, fi.Size(), ".", archive.Options{Links: archive.LinksInside, KeepModTimes: true, MemoryBudget: budget, StagingDir: work})
			f.Close()
			b.Close()
			if err != nil {
				return fmt.Errorf("capfs extract: %w", err)
			}
			ours = append(ours, time.Since(start))
			if profile != nil {
				pprof.StopCPUProfile()
				profile.Close()
				profile = nil
			}
			return nil
		}
		runTheirs := func() error {
			exec.Command("sync").Run()
			start := time.Now()
			x := exec.Command("tar", "--zstd", "-xf", tarball, "-C", d2)
			if out, err := x.CombinedOutput(); err != nil {
				return fmt.Errorf("tar -x: %v: %s", err, out)
			}
			theirs = append(theirs, time.Since(start))
			return nil
		}
		first, second := runOurs, runTheirs
		if i%2 == 1 {
			first, second = runTheirs, runOurs
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
		os.RemoveAll(d1)
		os.RemoveAll(d2)
	}
	slices.Sort(ours)
	slices.Sort(theirs)
	mo, mt := ours[len(ours)/2], theirs[len(theirs)/2]
	fmt.Printf("archive: %s (%.1f MiB compressed), %d entries extracted (%.1f MiB), %d filtered\n",
		filepath.Base(tarball), float64(fi.Size())/(1<<20), len(res.Extracted), float64(res.Bytes)/(1<<20), len(res.Filtered))
	for _, f := range res.Filtered {
		fmt.Printf("  filtered %s: %s %s\n", f.Name, f.Reason, f.Detail)
	}
	fmt.Println()
	fmt.Println("| workload | capfs ExtractArchive | tar --zstd -x | capfs / tar |")
	fmt.Println("|---|---:|---:|---:|")
	fmt.Printf("| extract Go src tar.zst (median of %d) | %v | %v | %.2f× |\n", count, mo.Round(time.Millisecond), mt.Round(time.Millisecond), float64(mo)/float64(mt))
	return nil
}
