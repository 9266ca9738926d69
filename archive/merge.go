package archive

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"slices"
	"sync"
)

// made is one entry the merge created (and a rollback removes).
type made struct {
	path string
	dir  bool
}

// merge writes the plan into the destination.
func (x *extractor) merge() error {
	x.res.Merged = true
	var created []made
	if err := x.mergeDirs(&created); err != nil {
		return x.rollback(created, err)
	}
	// Files, by parallel workers (each file is one Dir call, independent of the
	// others once the directories exist), with their times.
	if err := x.mergeFiles(&created); err != nil {
		return x.rollback(created, err)
	}
	for _, pass := range []kind{kindHardlink, kindSymlink} {
		for _, p := range x.plan {
			if p.kind != pass {
				continue
			}
			if err := x.mergeLink(p); err != nil {
				return x.rollback(created, err)
			}
			created = append(created, made{p.path, false})
		}
	}
	return nil
}

// rollback removes what the merge created, newest first, records whether
// all of it went, and returns cause.
func (x *extractor) rollback(created []made, cause error) error {
	ok := true
	for i := len(created) - 1; i >= 0; i-- {
		if err := x.t.Remove(context.WithoutCancel(x.ctx), created[i].path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			ok = false
		}
	}
	x.res.RolledBack = ok
	return cause
}

// mergeDirs creates the directories to create, parents first (explicit ones
// with their mode, the others 0755), adding each to created.
func (x *extractor) mergeDirs(created *[]made) error {
	dirs := make([]string, 0, len(x.hasDir))
	for d := range x.hasDir {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	modes := map[string]fs.FileMode{}
	for _, p := range x.plan {
		if p.kind == kindDir {
			modes[p.path] = p.mode
		}
	}
	for _, d := range dirs {
		m, ok := modes[d]
		if !ok {
			m = 0o755
		}
		if err := x.t.Mkdir(x.ctx, d, m); err != nil {
			return err
		}
		*created = append(*created, made{d, true})
	}
	return nil
}

// mergeLink makes a hard link (a copy of its target where the destination
// has none) or a symlink.
func (x *extractor) mergeLink(p planned) error {
	if p.kind == kindSymlink {
		return x.t.Symlink(x.ctx, p.link, p.path)
	}
	err := x.t.Link(x.ctx, p.link, p.path)
	if errors.Is(err, errors.ErrUnsupported) {
		src := x.fileOf(p.link)
		err = x.writeFile(src.path, p.path, src.mode, src.blob, src.size, false)
	}
	return err
}

// mergeFiles writes the plan's files with up to GOMAXPROCS workers (at least
// two: the calls wait on the kernel), stopping at the first error. created
// gets every file written, in no particular order.
func (x *extractor) mergeFiles(created *[]made) error {
	var files []planned
	for _, p := range x.plan {
		if p.kind == kindFile {
			files = append(files, p)
		}
	}
	workers := min(max(2, runtime.GOMAXPROCS(0)), 8, len(files))
	ctx, cancel := context.WithCancel(x.ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		next     int
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if firstErr != nil || next == len(files) {
					mu.Unlock()
					return
				}
				p := files[next]
				next++
				mu.Unlock()
				err := x.writeFile(p.path, p.path, p.mode, p.blob, p.size, p.repl)
				if err == nil && x.opts.KeepModTimes && !p.mtime.IsZero() {
					err = x.t.Chtimes(ctx, p.path, p.mtime, p.mtime)
					if err != nil && !p.repl {
						mu.Lock()
						*created = append(*created, made{p.path, false})
						mu.Unlock()
					}
				}
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
						cancel()
					}
				} else if !p.repl {
					*created = append(*created, made{p.path, false})
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// items lists the plan in Result.Extracted.
func (x *extractor) items() {
	for _, p := range x.plan {
		it := Item{Path: p.path, Size: p.size, Mode: p.mode, Link: p.link}
		switch p.kind {
		case kindFile:
			it.Type = "file"
			x.res.Bytes += p.size
		case kindDir:
			it.Type = "dir"
		case kindSymlink:
			it.Type = "symlink"
		case kindHardlink:
			it.Type = "hardlink"
		}
		if p.kind == kindHardlink {
			src := x.fileOf(p.link)
			it.Mode, it.Size = src.mode, src.size
		}
		x.res.Extracted = append(x.res.Extracted, it)
	}
}

func (x *extractor) fileOf(path string) planned {
	if x.files == nil {
		x.files = map[string]int{}
		for i, p := range x.plan {
			if p.kind == kindFile {
				x.files[p.path] = i
			}
		}
	}
	if i, ok := x.files[path]; ok {
		return x.plan[i]
	}
	return planned{blob: -1}
}

func (x *extractor) writeFile(src, path string, mode fs.FileMode, blob int, size int64, repl bool) error {
	if blob < 0 {
		return fmt.Errorf("%w: no data for %s", ErrCorrupt, src)
	}
	rc, err := x.stage.open(blob)
	if err != nil {
		return err
	}
	defer rc.Close()
	return x.t.Create(x.ctx, path, mode, rc, size, repl)
}
