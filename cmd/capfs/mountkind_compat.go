package main

import (
	"maps"

	"github.com/capfs/capfs/internal/mountkind"
)

// The kind names and the table that run*.go, cmd_sync.go and session.go still
// use. They go once those ask a mount's traits instead ([mountkind.Spec]'s
// WorkTree, Revision, HostDir, Ephemeral) and session.go's --mount help is
// [mountkind.UsageList].
var (
	kindPhysical = mountkind.Physical.Name
	kindGit      = mountkind.Git.Name
	kindMemory   = mountkind.Memory.Name
)

// mountKinds holds the kinds after physical, git and memory by name, as the
// registry of cmd/capfs did before [mountkind].
var mountKinds = laterKinds()

// laterKinds is the registry without physical, git and memory.
func laterKinds() map[string]*mountkind.Kind {
	m := map[string]*mountkind.Kind{}
	for _, k := range mountkind.List() {
		m[k.Name] = k
	}
	maps.DeleteFunc(m, func(n string, _ *mountkind.Kind) bool {
		return n == kindPhysical || n == kindGit || n == kindMemory
	})
	return m
}
