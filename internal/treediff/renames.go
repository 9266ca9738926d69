package treediff

import (
	"bytes"
	"context"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"

	"github.com/capfs/capfs/vfs"
)

// Rename detection bounds: files larger than maxRenameBytes are paired only
// by identical content, and inexact pairing is tried only when deleted ×
// added is at most maxRenamePairs (git's diff.renameLimit plays this role).
const (
	maxRenameBytes = 4 << 20
	maxRenamePairs = 100_000
	renameMinScore = 50
)

// Renames pairs deleted and added files and symlinks of changes, as
// "git diff -M" does. changes are as [Compare] returns them on a and b.
//
// Identical content is paired first (score 100), preferring the same base
// name. Then the most similar regular files scoring at least 50 are paired.
// The score is the bytes of lines the two files share over the larger file's
// size. Each pair becomes one change of kind [Renamed]. The result is sorted by
// (new) path. Files over 4 MiB, or unreadable ones, are paired only by
// identical content.
func Renames(ctx context.Context, a, b vfs.Backend, changes []Change) ([]Change, error) {
	r := renamer{ctx: ctx, a: a, b: b, cs: changes, used: map[int]bool{}}
	for i, c := range changes {
		switch {
		case c.Kind == Deleted && !c.OldMode.IsDir():
			r.dels = append(r.dels, i)
		case c.Kind == Added && !c.NewMode.IsDir():
			r.adds = append(r.adds, i)
		}
	}
	if len(r.dels) == 0 || len(r.adds) == 0 {
		return changes, nil
	}
	r.exact()
	if err := r.inexact(); err != nil {
		return nil, err
	}
	out := make([]Change, 0, len(changes))
	for i, c := range changes {
		if !r.used[i] {
			out = append(out, c)
		}
	}
	out = append(out, r.out...)
	sortChanges(out)
	return out, nil
}

type renamer struct {
	ctx        context.Context
	a, b       vfs.Backend
	cs         []Change
	dels, adds []int // indexes in cs
	used       map[int]bool
	out        []Change
}

func (r *renamer) pair(di, ai, score int) {
	r.used[di], r.used[ai] = true, true
	d, a := r.cs[di], r.cs[ai]
	r.out = append(r.out, Change{Kind: Renamed, Path: a.Path, OldPath: d.Path, Score: score,
		OldMode: d.OldMode, NewMode: a.NewMode, OldID: d.OldID, NewID: a.NewID})
}

func sameBase(p, q string) bool { return path.Base(p) == path.Base(q) }

// exact pairs deletions and additions of the same blob id (both links or
// both files), preferring a deletion with the added file's base name.
func (r *renamer) exact() {
	byID := map[string][]int{}
	for _, di := range r.dels {
		if id := r.cs[di].OldID; id != "" {
			byID[id] = append(byID[id], di)
		}
	}
	for _, ai := range r.adds {
		c := r.cs[ai]
		cands := byID[c.NewID]
		for k, di := range cands {
			if r.used[di] || (r.cs[di].OldMode&fs.ModeSymlink) != (c.NewMode&fs.ModeSymlink) {
				continue
			}
			best := di
			for _, dj := range cands[k:] {
				if !r.used[dj] && sameBase(r.cs[dj].Path, c.Path) {
					best = dj
					break
				}
			}
			r.pair(best, ai, 100)
			break
		}
	}
}

// unpairedRegular returns the indexes of idx not yet paired whose mode
// (old for deletions, new for additions) is a regular file's.
func (r *renamer) unpairedRegular(idx []int, old bool) []int {
	var out []int
	for _, i := range idx {
		m := r.cs[i].NewMode
		if old {
			m = r.cs[i].OldMode
		}
		if !r.used[i] && m.IsRegular() {
			out = append(out, i)
		}
	}
	return out
}

type candidate struct{ di, ai, score int }

// inexact pairs the remaining regular files by similarity, best first.
func (r *renamer) inexact() error {
	ld, la := r.unpairedRegular(r.dels, true), r.unpairedRegular(r.adds, false)
	if len(ld) == 0 || len(la) == 0 || len(ld)*len(la) > maxRenamePairs {
		return nil
	}
	cands, err := r.candidates(ld, la)
	if err != nil {
		return err
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].score != cands[j].score {
			return cands[i].score > cands[j].score
		}
		return r.candSameBase(cands[i]) && !r.candSameBase(cands[j])
	})
	for _, c := range cands {
		if !r.used[c.di] && !r.used[c.ai] {
			r.pair(c.di, c.ai, min(c.score, 99))
		}
	}
	return nil
}

// candidates returns the pairs of deletions ld and additions la scoring at
// least renameMinScore, in the order of ld, then la.
func (r *renamer) candidates(ld, la []int) ([]candidate, error) {
	sigs := map[int]*lineSig{}
	var cands []candidate
	for _, di := range ld {
		sd, err := r.sig(sigs, r.a, di)
		if err != nil {
			return nil, err
		}
		for _, ai := range la {
			if sd == nil {
				break
			}
			sa, err := r.sig(sigs, r.b, ai)
			if err != nil {
				return nil, err
			}
			if sa == nil {
				continue
			}
			if sc := sd.similarity(sa); sc >= renameMinScore {
				cands = append(cands, candidate{di, ai, sc})
			}
		}
		if err := r.ctx.Err(); err != nil {
			return nil, err
		}
	}
	return cands, nil
}

func (r *renamer) candSameBase(c candidate) bool { return sameBase(r.cs[c.di].Path, r.cs[c.ai].Path) }

// sig returns the line signature of change i's file in b, cached in sigs;
// nil when the file is too large or unreadable.
func (r *renamer) sig(sigs map[int]*lineSig, b vfs.Backend, i int) (*lineSig, error) {
	if s, ok := sigs[i]; ok {
		return s, nil
	}
	data, err := readSmall(r.ctx, b, r.cs[i].Path)
	if err != nil {
		return nil, err
	}
	var s *lineSig
	if data != nil {
		s = newLineSig(data)
	}
	sigs[i] = s
	return s, nil
}

// readSmall reads file p of b; nil when it is over maxRenameBytes, cannot be
// stat'ed or may not be read.
func readSmall(ctx context.Context, b vfs.Backend, p string) ([]byte, error) {
	vp, err := vfs.ParseGuest(p)
	if err != nil {
		return nil, nil
	}
	info, err := b.Lstat(ctx, vp)
	if err != nil || info.Size > maxRenameBytes {
		return nil, nil
	}
	f, err := b.OpenFile(ctx, vp, os.O_RDONLY, 0)
	if err != nil {
		return nil, unlessDenied(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRenameBytes+1))
	if err != nil || len(data) > maxRenameBytes {
		return nil, unlessDenied(err)
	}
	return data, nil
}

// unlessDenied is err, or nil for a permission error (that file is skipped).
func unlessDenied(err error) error {
	if vfs.CodeOf(err) == vfs.CodePermission {
		return nil
	}
	return err
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
