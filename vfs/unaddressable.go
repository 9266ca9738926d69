package vfs

import (
	"context"
	"fmt"
	"strings"
)

// Unaddressable is an entry a backend found in a directory it listed and left
// out of the listing, because no [Path] can name it (a host file named "a\b").
// Nothing can reach it through the backend, so a listing cannot show it.
type Unaddressable struct {
	// Name is the entry's name as the host holds it.
	Name string
	// Reason says why no Path can name it ("contains a backslash").
	Reason string
}

// String returns the name, quoted as Go quotes it, and the reason.
func (u Unaddressable) String() string { return fmt.Sprintf("%q: %s", u.Name, u.Reason) }

// unaddressableKey is the context key of WithUnaddressable.
type unaddressableKey struct{}

// WithUnaddressable returns a context that passes every [Unaddressable] entry
// a backend leaves out of a listing to report.
//
// report is called once per listing that meets the entry, instead of the entry
// being dropped silently. The report travels with the context through every
// layer above the backend ([Namespace], [ReadOnly], a Dir), so no wrapper needs
// to forward it. report may be called from several goroutines at once, and must
// not block. A listing not made under such a context drops the entry silently.
func WithUnaddressable(ctx context.Context, report func(Unaddressable)) context.Context {
	return context.WithValue(ctx, unaddressableKey{}, report)
}

// NoteUnaddressable reports u to the function ctx carries
// ([WithUnaddressable]), if any.
func NoteUnaddressable(ctx context.Context, u Unaddressable) {
	if report, ok := ctx.Value(unaddressableKey{}).(func(Unaddressable)); ok && report != nil {
		report(u)
	}
}

// NameProblem says why name cannot be a [Path]'s component, or "" if it can.
// It is the reason an [Unaddressable] carries.
func NameProblem(name string) string {
	switch {
	case ValidName(name):
		return ""
	case name == "" || name == "." || name == "..":
		return "not a name"
	case len(name) > MaxNameLen:
		return fmt.Sprintf("longer than %d bytes", MaxNameLen)
	case strings.Contains(name, `\`):
		return "contains a backslash"
	}
	return "contains a slash or a NUL byte"
}
