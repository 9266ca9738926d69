package authority

import (
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/capfs/capfs/policy"
)

// Subject is who holds a grant: an agent run, an extension, an automation, core
// code. Kind is a lower-case word ("agent-run"); ID identifies one subject of that
// kind ("conv1/run7"). The authority does not authenticate subjects: the host
// asserts them when it grants.
type Subject struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
}

// The subject kinds of the Filesystem Authority model. Other kinds are allowed if
// they are lower-case words (letters, digits and "-", starting with a letter).
const (
	KindCore       = "core"
	KindAgentRun   = "agent-run"
	KindExtension  = "extension"
	KindAutomation = "automation"
)

// String returns "kind:id", the form the Dir layer puts in every policy.Request and
// audit.Event (as Subject). ParseSubject reverses it.
func (s Subject) String() string { return s.Kind + ":" + s.ID }

// Validate reports whether s is well formed. Kind must be a lower-case word of
// at most 64 bytes. ID must be non-empty valid UTF-8 of at most 256 bytes,
// without control characters. The error wraps [fs.ErrInvalid].
func (s Subject) Validate() error {
	if !validKind(s.Kind) {
		return invalid("subject kind %q is not a lower-case word", s.Kind)
	}
	if s.ID == "" || len(s.ID) > 256 || !utf8.ValidString(s.ID) || strings.ContainsFunc(s.ID, isControl) {
		return invalid("subject id %q must be 1 to 256 bytes of printable UTF-8", s.ID)
	}
	return nil
}

// ParseSubject parses "kind:id" (split at the first colon) and validates it.
func ParseSubject(s string) (Subject, error) {
	kind, id, ok := strings.Cut(s, ":")
	if !ok {
		return Subject{}, invalid("subject %q is not kind:id", s)
	}
	sub := Subject{Kind: kind, ID: id}
	if err := sub.Validate(); err != nil {
		return Subject{}, err
	}
	return sub, nil
}

func validKind(k string) bool {
	if k == "" || len(k) > 64 || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// Access is one kind of authority a grant gives over its root: the Filesystem
// Authority model's FileAccess.
type Access string

// The accesses, and the policy operations each one permits (see Required):
//
//	Metadata  stat        Stat, Lstat, Exists
//	List      list        List, ReadDir, Walk, Glob
//	Read      read        ReadFile, Open for reading, Copy's source
//	          readlink    Readlink
//	Write     write       WriteFile, Append, Open for writing
//	          create      creating a file
//	          mkdir       CreateDir, MkdirAll
//	          copy        Copy's destination (the source also needs Read)
//	          symlink     Symlink
//	          link        Link
//	          chmod       Chmod
//	          chtimes     Chtimes
//	Delete    remove      Remove, RemoveAll
//	Move      rename      Move (within a mount, and with AllowCopy across mounts)
//	Archive   (purpose)   archive.ExtractDirFile, ExtractToDir, CreateFromDir: every
//	                      call they make carries dir.PurposeArchive and needs Archive
//	                      as well as its own access (Write and Metadata to extract,
//	                      List, Metadata and Read to create)
//	Watch     (purpose)   Dir.Watch: needs Watch, and each event is delivered only if
//	                      the grant would allow a Stat of its path
//
// The sub operation (Sub, OpenDir, OpenFile) needs no particular access: it only
// narrows, and every call on the result is checked again.
const (
	Read     Access = "read"
	Write    Access = "write"
	Delete   Access = "delete"
	List     Access = "list"
	Move     Access = "move"
	Metadata Access = "metadata"
	Archive  Access = "archive"
	Watch    Access = "watch"
)

// allAccess is every Access, in canonical order (the order grant records list them).
var allAccess = [...]Access{List, Metadata, Read, Write, Delete, Move, Archive, Watch}

// Valid reports whether a is one of the Access constants.
func (a Access) Valid() bool { return a.bit() != 0 }

func (a Access) bit() accessSet {
	for i, x := range allAccess {
		if x == a {
			return 1 << i
		}
	}
	return 0
}

// ReadOnlyAccess returns the accesses a read-only grant usually wants: List,
// Metadata and Read.
func ReadOnlyAccess() []Access { return []Access{List, Metadata, Read} }

// FullAccess returns every Access.
func FullAccess() []Access { return slices.Clone(allAccess[:]) }

// Required returns the Access a policy operation needs (see the Access constants).
// For policy.OpSub it returns "" and true: no particular access. For an operation
// it does not know it returns false, and grants refuse that operation.
func Required(op policy.Op) (Access, bool) {
	switch op {
	case policy.OpStat:
		return Metadata, true
	case policy.OpList:
		return List, true
	case policy.OpRead, policy.OpReadlink:
		return Read, true
	case policy.OpWrite, policy.OpCreate, policy.OpMkdir, policy.OpCopy, policy.OpSymlink,
		policy.OpLink, policy.OpChmod, policy.OpChtimes, policy.OpChown:
		return Write, true
	case policy.OpRemove:
		return Delete, true
	case policy.OpRename:
		return Move, true
	case policy.OpSub:
		return "", true
	}
	return "", false
}

// accessSet is a set of Access values, one bit each (in allAccess order).
type accessSet uint8

func (s accessSet) has(a Access) bool { return s&a.bit() != 0 }

// writes reports whether s holds an access that changes the tree.
func (s accessSet) writes() bool { return s.has(Write) || s.has(Delete) || s.has(Move) }

func (s accessSet) list() []Access {
	out := make([]Access, 0, len(allAccess))
	for _, a := range allAccess {
		if s.has(a) {
			out = append(out, a)
		}
	}
	return out
}

// Source says where a grant's authority came from.
type Source string

// The sources of the Filesystem Authority model.
const (
	SourceManifest     Source = "manifest"      // an extension's declared permissions
	SourceConversation Source = "conversation"  // the conversation's workspace
	SourceUserApproval Source = "user-approval" // a user approved it when asked
	SourceCore         Source = "core"          // core code granted it for its own use
)

// Valid reports whether s is one of the Source constants.
func (s Source) Valid() bool {
	switch s {
	case SourceManifest, SourceConversation, SourceUserApproval, SourceCore:
		return true
	}
	return false
}

// Status is the state of a grant.
type Status string

// The states. A grant starts active and ends once, revoked or expired; it never
// becomes active again.
const (
	Active  Status = "active"
	Revoked Status = "revoked" // the host revoked it (Revoke, RevokeSubject, Unregister)
	Expired Status = "expired" // its expiry time passed while it was active
)

// Grant is the record of one grant: what the host gave whom, over which root,
// why, and until when. It is a value: the authority hands out copies, so
// changing one changes nothing. It serializes to JSON for sandbox wrappers and
// other readers, with Access, Source and Status as strings and times in RFC 3339.
// It holds the root's registered name, never a host path.
type Grant struct {
	ID      string  `json:"id"`
	Subject Subject `json:"subject"`
	// Root is the name the root was registered under (Authority.Register).
	Root string `json:"root"`
	// Kind is the root's kind (RegisterRoot), "" for a root without one.
	Kind RootKind `json:"root_kind,omitempty"`
	// Path is the directory within the root the grant is confined to, slash-separated
	// and cleaned; "." is the whole root. It is the path as asked for.
	Path string `json:"path"`
	// Resolved is the canonical place Path led to when the grant was made (the
	// same, unless Path runs through a symlink): the directory the grant is pinned
	// to, decided there, and the prefix of the paths its decisions and audit events
	// name. Remaking or restoring the grant requires Path to lead there still.
	// Empty in records written before it was kept.
	Resolved string `json:"resolved,omitempty"`
	// Access is the set granted, without duplicates, in the order List, Metadata,
	// Read, Write, Delete, Move, Archive, Watch.
	Access  []Access  `json:"access"`
	Reason  string    `json:"reason"`
	Source  Source    `json:"source"`
	Created time.Time `json:"created"`
	// Expires is when the grant stops working; zero means never.
	Expires time.Time `json:"expires,omitzero"`
	Status  Status    `json:"status"`
	// Ended is when the grant was revoked, or found expired (which can be later
	// than Expires); zero while it is active.
	Ended time.Time `json:"ended,omitzero"`
}

// Has reports whether the grant includes access a.
func (g Grant) Has(a Access) bool { return slices.Contains(g.Access, a) }

// Writable reports whether the grant includes an access that changes the tree:
// Write, Delete or Move. The Dir of a grant without one is read-only, and a
// sandbox can bind its root read-only.
func (g Grant) Writable() bool { return g.Has(Write) || g.Has(Delete) || g.Has(Move) }

// GrantRequest asks for a grant. Subject, Root, Access, Reason and Source are
// required; at most one of TTL and Expires may be set.
type GrantRequest struct {
	Subject Subject
	// Root is a name given to Register.
	Root string
	// Path confines the grant to a directory within the root ("" or "." for the
	// whole root). It is parsed like a guest path: "/" means the root, and it cannot
	// climb above it.
	Path string
	// Resolved, if not empty, is where Path must lead (a record's Resolved, when a
	// grant is made again from its record, as capfs run --grants does): a Path that
	// now leads elsewhere is refused with an error wrapping [fs.ErrPermission].
	Resolved string
	Access   []Access
	// Reason says why, for the record and the audit trail ("apply model edit").
	Reason string
	Source Source
	// TTL, if positive, makes the grant expire that long after it is made.
	TTL time.Duration
	// Expires, if not zero, is when the grant expires. It must be in the future.
	Expires time.Time
}

// invalid returns an error wrapping fs.ErrInvalid.
func invalid(format string, args ...any) error {
	return fmt.Errorf("authority: %s: %w", fmt.Sprintf(format, args...), fs.ErrInvalid)
}
