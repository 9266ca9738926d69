package main

import (
	"bytes"
	"context"
	"hash/fnv"
	"io/fs"
	"path"
	"sort"

	"github.com/capfs/capfs/backends/gitree"
	"github.com/capfs/capfs/vfs"
)

// rename is a deleted file paired with an added one.
type rename struct {
	from, to string
	score    int // similarity, percent
	del, add gitree.Change
}

// Rename detection bounds: files larger than maxRenameBytes are paired only by
// identical content, and inexact pairing is tried only when deleted × added is
// at most maxRenamePairs (git's diff.renameLimit plays this role).
const (
	maxRenameBytes = 4 << 20
	maxRenamePairs = 100_000
	renameMinScore = 50
)

// detectRenames pairs deleted and added regular files (and symlinks) as git
// does: identical content first (100%), then the most similar pairs scoring
// at least 50%, where the score is the bytes of lines the two files share
// over the larger file's size. It returns the changes left and the renames.
func detectRenames(ctx context.Context, ba, bb vfs.Backend, changes []gitree.Change) ([]gitree.Change, []rename, error) {
	var dels, adds []int
	for i, c := range changes {
		switch {
		case c.Kind == gitree.Deleted && !c.OldMode.IsDir():
			dels = append(dels, i)
		case c.Kind == gitree.Added && !c.NewMode.IsDir():
			adds = append(adds, i)
		}
	}
	if len(dels) == 0 || len(adds) == 0 {
		return changes, nil, nil
	}
	used := map[int]bool{}
	var out []rename
	pair := func(di, ai, score int) {
		used[di], used[ai] = true, true
		out = append(out, rename{from: changes[di].Path, to: changes[ai].Path, score: score, del: changes[di], add: changes[ai]})
	}
	// Exact: the same blob id (and both links or both files).
	byID := map[string][]int{}
	for _, di := range dels {
		if id := changes[di].OldID; id != "" {
			byID[id] = append(byID[id], di)
		}
	}
	for _, ai := range adds {
		c := changes[ai]
		cands := byID[c.NewID]
		for k, di := range cands {
			if used[di] || (changes[di].OldMode&fs.ModeSymlink) != (c.NewMode&fs.ModeSymlink) {
				continue
			}
			// Prefer the candidate with the same base name, as git does.
			best := di
			for _, dj := range cands[k:] {
				if !used[dj] && path.Base(changes[dj].Path) == path.Base(c.Path) {
					best = dj
					break
				}
			}
			pair(best, ai, 100)
			break
		}
	}
	// Inexact: regular files only.
	var ld, la []int
	for _, di := range dels {
		if !used[di] && changes[di].OldMode.IsRegular() {
			ld = append(ld, di)
		}
	}
	for _, ai := range adds {
		if !used[ai] && changes[ai].NewMode.IsRegular() {
			la = append(la, ai)
		}
	}
	if len(ld) > 0 && len(la) > 0 && len(ld)*len(la) <= maxRenamePairs {
		sigs := map[int]*lineSig{}
		sig := func(b vfs.Backend, i int, p string) (*lineSig, error) {
			if s, ok := sigs[i]; ok {
				return s, nil
			}
			info, err := b.Lstat(ctx, vfs.MustParse(p))
			if err != nil || info.Size > maxRenameBytes {
				sigs[i] = nil
				return nil, nil
			}
			data, err := readBackend(ctx, b, p)
			if err != nil {
				if vfs.CodeOf(err) == vfs.CodePermission {
					sigs[i] = nil
					return nil, nil
				}
				return nil, err
			}
			s := newLineSig(data)
			sigs[i] = s
			return s, nil
		}
		type cand struct{ di, ai, score int }
		var cands []cand
		for _, di := range ld {
			sd, err := sig(ba, di, changes[di].Path)
			if err != nil {
				return nil, nil, err
			}
			if sd == nil {
				continue
			}
			for _, ai := range la {
				sa, err := sig(bb, ai, changes[ai].Path)
				if err != nil {
					return nil, nil, err
				}
				if sa == nil {
					continue
				}
				if sc := sd.similarity(sa); sc >= renameMinScore {
					cands = append(cands, cand{di, ai, sc})
				}
			}
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
		}
		sort.SliceStable(cands, func(i, j int) bool {
			if cands[i].score != cands[j].score {
				return cands[i].score > cands[j].score
			}
			bi := path.Base(changes[cands[i].di].Path) == path.Base(changes[cands[i].ai].Path)
			bj := path.Base(changes[cands[j].di].Path) == path.Base(changes[cands[j].ai].Path)
			return bi && !bj
		})
		for _, c := range cands {
			if !used[c.di] && !used[c.ai] {
				pair(c.di, c.ai, min(c.score, 99))
			}
		}
	}
	left := changes[:0:0]
	for i, c := range changes {
		if !used[i] {
			left = append(left, c)
		}
	}
	return left, out, nil
}

// lineSig is a multiset of a file's lines (by hash) with their byte lengths.
type lineSig struct {
	lines map[uint64]lineCount
	size  int
}

type lineCount struct{ n, bytes int }

func newLineSig(data []byte) *lineSig {
	s := &lineSig{lines: map[uint64]lineCount{}, size: len(data)}
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		line := data
		if i >= 0 {
			line, data = data[:i+1], data[i+1:]
		} else {
			data = nil
		}
		h := fnv.New64a()
		h.Write(line)
		k := h.Sum64()
		lc := s.lines[k]
		lc.n++
		lc.bytes = len(line)
		s.lines[k] = lc
	}
	return s
}

// similarity is the percentage of the larger file's bytes found as lines in
// both files.
func (s *lineSig) similarity(o *lineSig) int {
	big := max(s.size, o.size)
	if big == 0 {
		return 100
	}
	common := 0
	for k, a := range s.lines {
		if b, ok := o.lines[k]; ok {
			common += min(a.n, b.n) * a.bytes
		}
	}
	return common * 100 / big
}
