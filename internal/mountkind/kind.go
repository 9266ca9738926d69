// Package mountkind holds the kinds of mount the capfs command line takes
// (physical, git, memory, cas, sqlite, agentfs), one file each, and the
// registry that finds them by name.
//
// A [Kind] parses its --mount and configuration file forms into a [Spec] and
// opens a Spec into a [vfs.Backend]. What the command line asks of a mount
// (is it a host work tree, a git revision, scratch space?) it asks of the
// Spec's [Traits], never of the kind's name.
package mountkind

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/capfs/capfs/vfs"
)

// Spec is one mount as the user asked for it.
type Spec struct {
	Path vfs.Path
	// Kind is the name of the mount's [Kind].
	Kind string
	// Source is the argument as the user wrote it; listings and errors echo it.
	Source string
	// Host is the absolute host path behind the mount: the directory of a
	// physical or git mount, the file of a sqlite or agentfs mount.
	Host string
	// Rev is a git mount's revision.
	Rev      string
	ReadOnly bool
	// Origin is where the mount was asked for: "--mount", the configuration
	// file's name, or "default".
	Origin string
	// Quota is a memory mount's quota in bytes: 0 for the session's default
	// ([Env.MemoryQuota]), negative for no limit.
	Quota int64
	// Opts holds a kind's own settings, as its Option and Parse functions
	// record them.
	Opts map[string]string
}

// Traits are what the command line may ask of a kind's mounts.
type Traits struct {
	// WorkTree: a host directory read and written in place, which capfs run
	// can check out and sync back to.
	WorkTree bool
	// Revision: a git revision of the host repository [Spec.Host], at
	// [Spec.Rev], always read-only.
	Revision bool
	// Ephemeral: scratch space gone when capfs exits, bounded by [Spec.Quota].
	Ephemeral bool
	// Persistent: scratch space kept across sessions.
	Persistent bool
}

// Env is what a session decides for every mount it opens, and the
// environment it reads them in.
type Env struct {
	// MemoryQuota is the quota of an ephemeral mount without its own
	// (negative: no limit).
	MemoryQuota int64
	// Getenv reads the environment variables the kinds consult
	// (CAPFS_PHYSICAL_RESOLVER, CAPFS_CAS_STORE, XDG_CACHE_HOME,
	// XDG_DATA_HOME, HOME); nil is [os.Getenv]. A program running several
	// command lines at once gives each its own.
	Getenv func(string) string
}

// getenv returns the environment variable k as e reads it.
func (e Env) getenv(k string) string {
	if e.Getenv == nil {
		return os.Getenv(k)
	}
	return e.Getenv(k)
}

// homeDir is [os.UserHomeDir] in e: $HOME.
func (e Env) homeDir() (string, error) {
	if h := e.getenv("HOME"); h != "" {
		return h, nil
	}
	return "", errors.New("$HOME is not defined")
}

// cacheDir is [os.UserCacheDir] in e: $XDG_CACHE_HOME, else ~/.cache.
func (e Env) cacheDir() (string, error) {
	if d := e.getenv("XDG_CACHE_HOME"); d != "" {
		if !filepath.IsAbs(d) {
			return "", errors.New("path in $XDG_CACHE_HOME is relative")
		}
		return d, nil
	}
	h, err := e.homeDir()
	if err != nil {
		return "", errors.New("neither $XDG_CACHE_HOME nor $HOME are defined")
	}
	return filepath.Join(h, ".cache"), nil
}

// Config is one mount of the configuration file, without its path.
type Config struct {
	Kind, Source, Rev string
	ReadOnly          bool
	Quota             string
}

// Kind is a mount kind: its name, its syntax, how it opens and its [Traits].
type Kind struct {
	// Name is the KIND of --mount PATH=KIND:ARG and of the configuration
	// file's kind.
	Name string
	// Usage is the --mount form after "PATH=", e.g. "sqlite:FILE[,ro]"; it is
	// shown in errors and the help.
	Usage string
	// Help is the one line the root help shows beside Usage.
	Help string
	Traits
	// Option takes one trailing ",OPT" of a --mount argument (after ",ro"
	// and ",rw", which every kind takes). It reports false for an option it
	// does not know, which then stays part of the argument (a path may
	// contain commas). Nil: the kind has no options of its own.
	Option func(spec *Spec, opt string) (bool, error)
	// Options, when set, lists every option the kind takes ("ro, rw or
	// quota=SIZE"): an unknown one is refused instead of kept in the
	// argument.
	Options string
	// Parse checks ARG (the --mount argument after "KIND:" and its options,
	// or a configuration file's source) and fills spec: Source as the user
	// wrote it, Host when ARG names a host file (relative to base: the
	// configuration file's directory, or the working directory of a
	// --mount; "" meaning the process's current directory). spec.Rev is the configuration file's
	// rev ("" when none was given).
	Parse func(spec *Spec, arg, base string) error
	// Flag, when set, replaces Parse for --mount, with its own messages;
	// base is as Parse's.
	Flag func(spec *Spec, arg, base string) error
	// Config, when set, replaces Parse for the configuration file, with its
	// own messages; the default refuses a quota.
	Config func(spec *Spec, c Config, base string) error
	// Open opens the backend of spec, setting what it decides (a memory
	// mount's quota). The session closes the backend at exit when it has a
	// Close() error method.
	Open func(ctx context.Context, spec *Spec, env Env) (vfs.Backend, error)
}

// kindOf is the registered kind of s, or nil.
func (s Spec) kindOf() *Kind { return kinds[s.Kind] }

// traits are the [Traits] of s's kind (none for an unknown kind).
func (s Spec) traits() Traits {
	if k := s.kindOf(); k != nil {
		return k.Traits
	}
	return Traits{}
}

// WorkTree reports whether s is a host directory read and written in place
// ([Traits.WorkTree]): the directory is [Spec.Host].
func (s Spec) WorkTree() bool { return s.traits().WorkTree && s.Host != "" }

// Revision reports whether s shows a git revision ([Traits.Revision]): the
// repository at [Spec.Host], at [Spec.Rev].
func (s Spec) Revision() bool { return s.traits().Revision && s.Host != "" }

// HostDir is the host directory behind a [Spec.WorkTree] or [Spec.Revision]
// mount, or "".
func (s Spec) HostDir() string {
	if t := s.traits(); t.WorkTree || t.Revision {
		return s.Host
	}
	return ""
}

// Ephemeral reports whether s is scratch space gone when capfs exits
// ([Traits.Ephemeral]), bounded by [Spec.Quota].
func (s Spec) Ephemeral() bool { return s.traits().Ephemeral }

// Persistent reports whether s is scratch space kept across sessions
// ([Traits.Persistent]).
func (s Spec) Persistent() bool { return s.traits().Persistent }
