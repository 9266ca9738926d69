package syncback_test

import (
	"context"
	"testing"

	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/materialize/internal/mattest"
	"github.com/capfs/capfs/vfs"
)

// source is a Dir to check out, with the host directory behind it when physical.
type source struct {
	name string
	d    *dir.Dir
	b    vfs.Backend
	host string // "" for memory
}

// forEach runs fn on a memory source and a physical one ([mattest.ForEach]).
func forEach(t *testing.T, fn func(t *testing.T, s source), opts ...dir.Option) {
	mattest.ForEach(t, func(t *testing.T, s mattest.Source) { fn(t, source{s.Name, s.D, s.B, s.Host}) }, opts...)
}

var ctx = context.Background()

// The shared fixtures (package mattest).
var (
	fill     = mattest.Fill
	must     = mattest.Must
	checkout = mattest.Checkout
	snapshot = mattest.Snapshot
	sameMap  = mattest.SameMap
	kinds    = mattest.Kinds
)
