package mountkind

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/capfs/capfs/vfs"
)

// kinds holds the registered kinds by name.
var kinds = map[string]*Kind{}

// first are the kinds [List] puts before the others, in this order.
var first = []string{"physical", "git", "memory"}

// Register adds k and returns it; a second registration of a name panics.
// Each kind registers itself from its own file.
func Register(k *Kind) *Kind {
	if _, dup := kinds[k.Name]; dup {
		panic("capfs: mount kind registered twice: " + k.Name)
	}
	kinds[k.Name] = k
	return k
}

// Lookup returns the kind named name, or nil.
func Lookup(name string) *Kind { return kinds[name] }

// List returns every kind in help order: physical, git and memory, then the
// others by name.
func List() []*Kind {
	var out []*Kind
	for _, n := range first {
		if k := kinds[n]; k != nil {
			out = append(out, k)
		}
	}
	var rest []string
	for n := range kinds {
		if !slices.Contains(first, n) {
			rest = append(rest, n)
		}
	}
	slices.Sort(rest)
	for _, n := range rest {
		out = append(out, kinds[n])
	}
	return out
}

// NameList lists every kind for messages, in [List] order: "physical, git,
// memory, ... or sqlite".
func NameList() string {
	ks := List()
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = k.Name
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// UsageList lists every kind's --mount form for the flag's help, in [List]
// order: "physical:HOSTDIR, git:REPO[@REV], ...".
func UsageList() string {
	ks := List()
	usages := make([]string, len(ks))
	for i, k := range ks {
		usages[i] = k.Usage
	}
	return strings.Join(usages, ", ")
}

// ParseFlag parses the KIND:ARG[,OPT...] of --mount PATH=KIND:ARG, the mount
// at path; a relative host path in it is taken from the directory dir (""
// is the process's current directory). Its errors say what is wrong,
// without the flag.
func ParseFlag(path vfs.Path, arg, dir string) (Spec, error) {
	kind, src, _ := strings.Cut(arg, ":")
	spec := Spec{Path: path, Kind: kind, Origin: "--mount"}
	k := kinds[kind]
	src, err := takeOptions(&spec, k, src)
	switch {
	case err != nil:
		return Spec{}, err
	case kind == "":
		return Spec{}, fmt.Errorf("missing kind: want PATH=KIND:ARG with KIND %s", NameList())
	case k == nil:
		return Spec{}, fmt.Errorf("unknown kind %q (want %s)", kind, NameList())
	}
	if err := k.parseFlag(&spec, src, dir); err != nil {
		return Spec{}, err
	}
	return spec, nil
}

// takeOptions takes the trailing options off src: ",ro" and ",rw", in any
// number, and k's own. It returns the rest of src.
func takeOptions(spec *Spec, k *Kind, src string) (string, error) {
	for {
		i := strings.LastIndexByte(src, ',')
		if i < 0 {
			return src, nil
		}
		ok, err := takeOption(spec, k, src[i+1:])
		if err != nil || !ok {
			return src, err
		}
		src = src[:i]
	}
}

// takeOption takes one option; false: opt is part of the argument.
func takeOption(spec *Spec, k *Kind, opt string) (bool, error) {
	switch opt {
	case "ro":
		spec.ReadOnly = true
		return true, nil
	case "rw":
		spec.ReadOnly = false
		return true, nil
	}
	if k == nil {
		return false, nil
	}
	if k.Option != nil {
		ok, err := k.Option(spec, opt)
		if err != nil {
			return false, fmt.Errorf("%s: %v", opt, err)
		}
		if ok {
			return true, nil
		}
	}
	if k.Options != "" {
		return false, fmt.Errorf("unknown option %q (want %s)", opt, k.Options)
	}
	return false, nil
}

// parseFlag fills spec from the --mount argument arg, relative host paths
// taken from dir.
func (k *Kind) parseFlag(spec *Spec, arg, dir string) error {
	if k.Flag != nil {
		return k.Flag(spec, arg, dir)
	}
	if err := k.Parse(spec, arg, dir); err != nil {
		return fmt.Errorf("%v (want PATH=%s)", err, k.Usage)
	}
	return nil
}

// ParseConfig parses a configuration file's mount c at path; origin is the
// file's name and base its directory, which relative paths are taken from.
// Its errors say what is wrong, without which mount.
func ParseConfig(path vfs.Path, c Config, origin, base string) (Spec, error) {
	spec := Spec{Path: path, Kind: c.Kind, Source: c.Source, Rev: c.Rev, ReadOnly: c.ReadOnly, Origin: origin}
	if c.Kind == "" {
		return Spec{}, fmt.Errorf("missing kind (%s)", NameList())
	}
	k := kinds[c.Kind]
	if k == nil {
		return Spec{}, fmt.Errorf("unknown kind %q (want %s)", c.Kind, NameList())
	}
	if err := k.parseConfig(&spec, c, base); err != nil {
		return Spec{}, err
	}
	return spec, nil
}

// parseConfig fills spec from the configuration file's mount c.
func (k *Kind) parseConfig(spec *Spec, c Config, base string) error {
	if k.Config != nil {
		return k.Config(spec, c, base)
	}
	if c.Quota != "" {
		return errors.New("quota applies to memory mounts only")
	}
	return k.Parse(spec, c.Source, base)
}

// Open opens the backend spec names, setting in spec what the kind decides
// (a memory mount's quota from env).
func Open(ctx context.Context, spec *Spec, env Env) (vfs.Backend, error) {
	k := kinds[spec.Kind]
	if k == nil {
		return nil, fmt.Errorf("unknown kind %q", spec.Kind)
	}
	return k.Open(ctx, spec, env)
}
