package dir

import "context"

// purposeKey marks the context of every Dir call a composite operation makes on
// the guest's behalf (an archive extraction or creation, a watch), so that a
// policy can require more than the per-call access: package authority requires
// its Archive access for the calls archive.ExtractDirFile, ExtractToDir and
// CreateFromDir make.
type purposeKey struct{}

// The purposes Purpose reports.
const (
	PurposeArchive = "archive" // the calls of archive.ExtractDirFile, ExtractToDir and CreateFromDir
	PurposeWatch   = "watch"   // the decisions of Watch
)

// Purpose returns the composite operation the call ctx belongs to
// (PurposeArchive, PurposeWatch), or "" for a plain call. Policies and hooks
// read it from the context they are given.
func Purpose(ctx context.Context) string {
	s, _ := ctx.Value(purposeKey{}).(string)
	return s
}

// WithPurpose returns ctx marked as belonging to the composite operation p.
// A purpose only ever adds a requirement (a grant without Archive access
// refuses the calls of an extraction), so whoever may call the Dir may set it:
// leaving it out grants nothing a plain call would not.
func WithPurpose(ctx context.Context, p string) context.Context {
	return context.WithValue(ctx, purposeKey{}, p)
}

func withPurpose(ctx context.Context, p string) context.Context { return WithPurpose(ctx, p) }
