package gitree

import (
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/capfs/capfs/backends/gitree/internal/pack"
)

// packGuard is the storage go-git works on when the direct pack reader is on
// (the default). Every object of a pack the reader opened, or refused because
// the pack does not match its index, is read by the reader, with its bounds: so
// go-git, whose own pack reading follows a delta cycle into unbounded recursion
// (a fatal stack overflow), never reads those packs, not even to resolve the
// revision at Open. Other objects (loose ones, packs the reader leaves to go-git)
// go to the filesystem storage, as does everything else (refs, writes).
type packGuard struct {
	*filesystem.Storage
	ps *pack.Store
}

// EncodedObject returns object h, of type t (or any type for AnyObject).
func (g *packGuard) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	typ, data, err := g.ps.Read(h, -1)
	switch {
	case err == pack.ErrNotPacked:
		return g.Storage.EncodedObject(t, h)
	case err != nil:
		return nil, err
	case t != plumbing.AnyObject && typ != t:
		return nil, plumbing.ErrObjectNotFound
	}
	o := &plumbing.MemoryObject{}
	o.SetType(typ)
	if _, err := o.Write(data); err != nil {
		return nil, err
	}
	return o, nil
}
