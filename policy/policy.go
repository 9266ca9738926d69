// Package policy decides whether a guest's call on a capability may proceed.
//
// Every call on a dir.Dir or dir.File becomes one Request. The Dir asks its Policy for a
// Decision: Allow, Deny, or Ask, in which case the host's Asker settles it. A Policy
// must be safe for concurrent use and should be fast: it runs on every call.
//
// This package holds the interfaces the Dir layer enforces and the simplest policies;
// what it does not do is interpret paths for the host: a Request's Path is the path
// from the capability tree's root, as the Dir knows it, not a host path.
package policy

import (
	"context"
	"fmt"
)

// Op names a guest operation. The set is closed: every Dir and File method maps to one.
type Op string

// The operations.
const (
	OpStat     Op = "stat"     // Stat, Lstat, Exists
	OpList     Op = "list"     // List, ReadDir, Walk and Glob listings
	OpRead     Op = "read"     // reading file contents (ReadFile, Open for reading, Copy's source)
	OpWrite    Op = "write"    // writing file contents (WriteFile, Append, Open for writing)
	OpCreate   Op = "create"   // creating a file
	OpMkdir    Op = "mkdir"    // creating a directory
	OpRemove   Op = "remove"   // Remove, RemoveAll
	OpRename   Op = "rename"   // Move within a mount
	OpCopy     Op = "copy"     // Copy's destination
	OpSymlink  Op = "symlink"  // creating a symlink
	OpReadlink Op = "readlink" // reading a symlink's target
	OpLink     Op = "link"     // creating a hard link
	OpChmod    Op = "chmod"    // changing permission bits
	OpChtimes  Op = "chtimes"  // changing times
	OpSub      Op = "sub"      // narrowing to a subtree or one file (Sub, OpenDir, OpenFile)
)

// Writes reports whether op can change the tree.
func (op Op) Writes() bool {
	switch op {
	case OpWrite, OpCreate, OpMkdir, OpRemove, OpRename, OpCopy, OpSymlink, OpLink, OpChmod, OpChtimes:
		return true
	}
	return false
}

// Request describes one guest call, as the policy, the hooks and the audit trail see it.
type Request struct {
	ID      string // unique per call
	Subject string // who is calling (the grant's subject), "" if unnamed
	Op      Op
	// Path is the target, slash-separated, from the root of the capability tree the
	// Dir was made from (so "home/.ssh/id_rsa" even when the guest holds a Sub of
	// "home" and wrote ".ssh/id_rsa"). "." is that root.
	Path string
	// Dest is the second path of a rename, copy or link, in the same form; "" otherwise.
	Dest string
	// GuestPath is the path as the guest wrote it, relative to the Dir it called.
	GuestPath string
	// Size is the number of bytes a write will leave in the file, when known; -1 otherwise.
	Size int64
}

// Effect is a policy's verdict.
type Effect int

// The effects.
const (
	Allow Effect = iota
	Deny
	Ask
)

func (e Effect) String() string {
	switch e {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	case Ask:
		return "ask"
	}
	return fmt.Sprintf("Effect(%d)", int(e))
}

// Decision is a Policy's answer.
type Decision struct {
	Effect Effect
	// Rule names the rule that decided, for the audit trail ("default", "deny:**/.ssh/**").
	Rule string
	// Reason is a human-readable explanation shown to the guest on denial.
	Reason string
}

// Policy decides requests. Implementations must be safe for concurrent use.
type Policy interface {
	Decide(ctx context.Context, r *Request) Decision
}

// Func adapts a function to a Policy.
type Func func(ctx context.Context, r *Request) Decision

// Decide calls f.
func (f Func) Decide(ctx context.Context, r *Request) Decision { return f(ctx, r) }

// AllowAll allows every request. It is the default when a Dir is given no policy.
var AllowAll Policy = Func(func(context.Context, *Request) Decision {
	return Decision{Effect: Allow, Rule: "allow-all"}
})

// Asker settles Ask decisions on the host's behalf (a prompt, a UI, a rule server).
// It returns true to allow. An error denies. Implementations must be safe for
// concurrent use and should honour ctx.
type Asker interface {
	Ask(ctx context.Context, r *Request, d Decision) (bool, error)
}

// AskFunc adapts a function to an Asker.
type AskFunc func(ctx context.Context, r *Request, d Decision) (bool, error)

// Ask calls f.
func (f AskFunc) Ask(ctx context.Context, r *Request, d Decision) (bool, error) { return f(ctx, r, d) }
