package vfs

import "context"

// expectRegularKey is the context key of ExpectRegular.
type expectRegularKey struct{}

// ExpectRegular returns a context that tells backends the caller opens names a
// listing has just shown as regular files, for reading (a search walking a
// tree). A backend may then take a path that is cheaper when the guess is right
// and gives the same result when it is wrong.
//
// The hint changes no result: what may be opened, what a policy decides on and
// every error stay as without it. It may weaken one guarantee, for a name that
// stopped being a regular file after the listing: that nothing but a regular
// file or a directory is ever opened. The physical backend opens such a name
// once, with O_NONBLOCK|O_NOCTTY and without following any symlink. It sees that
// it is not a regular file and closes it unread before taking its usual route
// (see [github.com/capfs/capfs/backends/physical]). Callers opening names they
// were given (a guest's path) must not set it.
func ExpectRegular(ctx context.Context) context.Context {
	return context.WithValue(ctx, expectRegularKey{}, true)
}

// ExpectsRegular reports whether ctx carries [ExpectRegular]'s hint.
func ExpectsRegular(ctx context.Context) bool {
	v, _ := ctx.Value(expectRegularKey{}).(bool)
	return v
}
