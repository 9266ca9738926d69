package authority

import (
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/capfs/capfs/vfs"
)

// RootKind is what a root holds, and so which defaults govern grants over it.
type RootKind string

// The root kinds of the Filesystem Authority model. Each one's defaults are in
// its [KindSpec] ([Spec]). [DefaultKindSpecs] lists them all.
const (
	// KindWorkspace is a conversation's or project's working tree, owned by the
	// workspace runtime. Any subject may be granted it. The default access is
	// read-only (List, Metadata, Read): write, delete and move must be asked for.
	KindWorkspace RootKind = "workspace"
	// KindExtensionStorage is one extension's private files, owned by the
	// extension host. Only the extension whose id is the root's Owner (and core)
	// may be granted it: no cross-extension access. Default: read and write.
	KindExtensionStorage RootKind = "extension-storage"
	// KindArtifact is exported artifacts, written through artifact APIs.
	// Default: List, Metadata, Read and Archive (read for rendering and export).
	// Writes must be asked for.
	KindArtifact RootKind = "artifact"
	// KindTemp is private 0700 scratch, made by [Authority.CreateTempWorkspace]
	// and removed by its owner's Close (or by [ReapTemp] after a crash). Only its
	// owner subject may be granted it. Default: every access.
	KindTemp RootKind = "temp"
	// KindKnowledge is a knowledge base. Explicit grants only: an access list
	// must be given (no default). Only core, automations and agent runs with a
	// user-approval, manifest or core source may be granted it.
	KindKnowledge RootKind = "knowledge"
	// KindDownloads is browser and import flows' staged downloads.
	// Default: List, Metadata, Read, Archive. Files are copied or extracted out of
	// it into a workspace or artifact root, not edited in place.
	KindDownloads RootKind = "downloads"
	// KindSecret is credentials. Opt-in only: an access list must be given, and
	// the source must be user-approval or core. List and Watch are never granted
	// (names stay unlisted). Archive is never granted (no bulk copy). The root is
	// never bound into a sandbox (Sandbox refuses its grants) and never listed by
	// [Authority.ListRoots].
	KindSecret RootKind = "secret"
)

// CleanupOwner says who removes a root's files when it is no longer needed.
type CleanupOwner string

// The cleanup owners.
const (
	CleanupHost      CleanupOwner = "host"      // the host's lifecycle (the authority never deletes files)
	CleanupAuthority CleanupOwner = "authority" // the authority: TempWorkspace.Close, ReapTemp
)

// KindSpec is the documented default policy of one root kind.
type KindSpec struct {
	Kind RootKind `json:"kind"`
	// Owner says which part of the host owns roots of this kind (documentation).
	Owner string `json:"owner"`
	// SubjectKinds lists the subject kinds that may be granted such a root; nil
	// means any.
	SubjectKinds []string `json:"subject_kinds,omitempty"`
	// OwnerOnly: a subject other than core must be the root's owner
	// (RootDescriptor.Owner equals Subject.ID).
	OwnerOnly bool `json:"owner_only,omitempty"`
	// Sources lists the grant sources accepted; nil means any.
	Sources []Source `json:"sources,omitempty"`
	// DefaultAccess is used when a GrantRequest has no Access; nil means a
	// request must name its access (explicit grants only).
	DefaultAccess []Access `json:"default_access,omitempty"`
	// Never lists accesses no grant over such a root may include.
	Never []Access `json:"never,omitempty"`
	// Listed: the root appears in ListRoots.
	Listed bool `json:"listed"`
	// Sandbox: the root's grants may be bound into a sandbox.
	Sandbox bool `json:"sandbox"`
	// Cleanup is who removes its files.
	Cleanup CleanupOwner `json:"cleanup"`
}

var specs = map[RootKind]KindSpec{
	KindWorkspace: {Kind: KindWorkspace, Owner: "workspace runtime", DefaultAccess: ReadOnlyAccess(),
		Listed: true, Sandbox: true, Cleanup: CleanupHost},
	KindExtensionStorage: {Kind: KindExtensionStorage, Owner: "extension host", SubjectKinds: []string{KindExtension, KindCore},
		OwnerOnly: true, DefaultAccess: []Access{List, Metadata, Read, Write, Delete, Move}, Listed: true, Sandbox: true, Cleanup: CleanupHost},
	KindArtifact: {Kind: KindArtifact, Owner: "artifacts extension / core export flow", DefaultAccess: []Access{List, Metadata, Read, Archive},
		Listed: true, Sandbox: true, Cleanup: CleanupHost},
	KindTemp: {Kind: KindTemp, Owner: "runtime (CreateTempWorkspace)", OwnerOnly: true, DefaultAccess: FullAccess(),
		Listed: true, Sandbox: true, Cleanup: CleanupAuthority},
	KindKnowledge: {Kind: KindKnowledge, Owner: "knowledge extension", SubjectKinds: []string{KindCore, KindAutomation, KindAgentRun, KindExtension},
		Sources: []Source{SourceUserApproval, SourceManifest, SourceCore}, Listed: true, Sandbox: true, Cleanup: CleanupHost},
	KindDownloads: {Kind: KindDownloads, Owner: "browser / import flows", DefaultAccess: []Access{List, Metadata, Read, Archive},
		Listed: true, Sandbox: true, Cleanup: CleanupHost},
	KindSecret: {Kind: KindSecret, Owner: "secrets / credentials surfaces", Sources: []Source{SourceUserApproval, SourceCore},
		Never: []Access{List, Watch, Archive}, Listed: false, Sandbox: false, Cleanup: CleanupHost},
}

// Spec returns the defaults of kind k, and false for a kind this package does
// not define.
func Spec(k RootKind) (KindSpec, bool) {
	s, ok := specs[k]
	if !ok {
		return KindSpec{}, false
	}
	s.SubjectKinds = slices.Clone(s.SubjectKinds)
	s.Sources = slices.Clone(s.Sources)
	s.DefaultAccess = slices.Clone(s.DefaultAccess)
	s.Never = slices.Clone(s.Never)
	return s, true
}

// DefaultKindSpecs returns the spec of every kind, in the model's order.
func DefaultKindSpecs() []KindSpec {
	out := make([]KindSpec, 0, len(specs))
	for _, k := range []RootKind{KindWorkspace, KindExtensionStorage, KindArtifact, KindTemp, KindKnowledge, KindDownloads, KindSecret} {
		s, _ := Spec(k)
		out = append(out, s)
	}
	return out
}

// RootDescriptor describes a root for RegisterRoot. Host paths are not part of
// it: the backend holds them, and they never leave the authority.
type RootDescriptor struct {
	// Name is the root's unique name; "" means Kind + ":" + ID.
	Name string   `json:"name"`
	Kind RootKind `json:"kind"`
	// ID identifies the root within its kind (a conversation id, an extension id).
	ID string `json:"id"`
	// Owner is the subject id that owns it, for OwnerOnly kinds
	// (extension-storage: the extension's id; temp: the workspace's subject).
	Owner       string            `json:"owner,omitempty"`
	DisplayName string            `json:"display_name,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
}

// RegisterRoot registers backend b as a root of a kind.
// Grants over it then follow the kind's [KindSpec]: who may be granted it,
// default and forbidden access, whether it may be sandboxed or listed.
// [Authority.Register] registers a root without a kind, which no kind rule
// restricts.
func (a *Authority) RegisterRoot(desc RootDescriptor, b vfs.Backend) error {
	if _, ok := specs[desc.Kind]; !ok {
		return invalid("unknown root kind %q", desc.Kind)
	}
	if desc.ID == "" || !utf8.ValidString(desc.ID) || strings.ContainsFunc(desc.ID, isControl) {
		return invalid("root id %q must be printable UTF-8", desc.ID)
	}
	if desc.Name == "" {
		desc.Name = string(desc.Kind) + ":" + desc.ID
	}
	desc.Labels = cloneMap(desc.Labels)
	return a.register(desc.Name, b, &desc)
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Root returns the descriptor of root name (a root registered by Register has
// only its Name set). An unknown name wraps [fs.ErrNotExist].
func (a *Authority) Root(name string) (RootDescriptor, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.roots[name]
	if !ok {
		return RootDescriptor{}, fmt.Errorf("authority: root %q: %w", name, fs.ErrNotExist)
	}
	if r.desc == nil {
		return RootDescriptor{Name: name}, nil
	}
	d := *r.desc
	d.Labels = cloneMap(d.Labels)
	return d, nil
}

// ListRoots returns the descriptors of the roots subject s could be granted
// under their kinds' rules, sorted by name. Secret roots are never listed
// (they are granted by name only); roots without a kind are listed.
func (a *Authority) ListRoots(s Subject) []RootDescriptor {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []RootDescriptor
	for name, r := range a.roots {
		if r.desc == nil {
			out = append(out, RootDescriptor{Name: name})
			continue
		}
		spec := specs[r.desc.Kind]
		if !spec.Listed || spec.allowSubject(*r.desc, s) != nil {
			continue
		}
		d := *r.desc
		d.Labels = cloneMap(d.Labels)
		out = append(out, d)
	}
	slices.SortFunc(out, func(x, y RootDescriptor) int { return strings.Compare(x.Name, y.Name) })
	return out
}

func (spec KindSpec) allowSubject(d RootDescriptor, s Subject) error {
	if spec.SubjectKinds != nil && !slices.Contains(spec.SubjectKinds, s.Kind) {
		return fmt.Errorf("authority: a %s root cannot be granted to a %s subject: %w", spec.Kind, s.Kind, fs.ErrPermission)
	}
	if spec.OwnerOnly && s.Kind != KindCore && s.ID != d.Owner {
		return fmt.Errorf("authority: %s root %q belongs to another subject: %w", spec.Kind, d.Name, fs.ErrPermission)
	}
	return nil
}

// applyKind checks req against the root's kind and fills its default access.
func applyKind(d *RootDescriptor, req *GrantRequest) error {
	if d == nil {
		return nil
	}
	spec := specs[d.Kind]
	if err := spec.allowSubject(*d, req.Subject); err != nil {
		return err
	}
	if spec.Sources != nil && !slices.Contains(spec.Sources, req.Source) {
		return fmt.Errorf("authority: a %s root needs a grant from %v, not %q: %w", spec.Kind, spec.Sources, req.Source, fs.ErrPermission)
	}
	if len(req.Access) == 0 {
		if spec.DefaultAccess == nil {
			return invalid("a %s root is granted only with an explicit access list", spec.Kind)
		}
		req.Access = slices.Clone(spec.DefaultAccess)
	}
	for _, x := range req.Access {
		if slices.Contains(spec.Never, x) {
			return fmt.Errorf("authority: %s access is never granted over a %s root: %w", x, spec.Kind, fs.ErrPermission)
		}
	}
	return nil
}
